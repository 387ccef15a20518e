// The operator settings docs/connect.md gives for one client, read from the doc itself: its fenced block that
// starts `# operator settings: <client>`, with `KEY=value` lines and `# pinned: <file>` lines naming documents of
// deploy/cimd-pinned/. The client's test starts its IdP with exactly these (test/clients/*), so a recipe whose
// values stopped working fails that test.
import { readFileSync } from 'node:fs';

const CONNECT = new URL('../../docs/connect.md', import.meta.url);
const PINNED = new URL('../../deploy/cimd-pinned/', import.meta.url);

export interface OperatorSettings {
  /** PLATFORM_ALLOWED_REDIRECT_URIS, split. */
  allowedRedirectUris: string[];
  /** The pinned documents, as deploy/cimd-pinned/ holds them. */
  pinned: Array<Record<string, unknown>>;
}

export function operatorSettings(client: string): OperatorSettings {
  const blocks = readFileSync(CONNECT, 'utf8').split('```');
  const block = blocks.find((b) => new RegExp(`^sh\\n# operator settings: ${client}\\n`).test(b));
  if (block === undefined) throw new Error(`docs/connect.md has no operator settings block for ${client}`);
  const settings: OperatorSettings = { allowedRedirectUris: [], pinned: [] };
  const known = new Set(['PLATFORM_ALLOWED_REDIRECT_URIS', 'PLATFORM_CIMD_PINNED_DIR']);
  for (const line of block.split('\n').slice(2)) {
    if (line.trim() === '') continue;
    const pinned = /^# pinned: (\S+)$/.exec(line);
    if (pinned) {
      settings.pinned.push(JSON.parse(readFileSync(new URL(pinned[1]!, PINNED), 'utf8')));
      continue;
    }
    const m = /^([A-Z_]+)=(.*)$/.exec(line);
    if (!m || !known.has(m[1]!))
      throw new Error(`docs/connect.md (${client}): a line the test cannot apply: ${line}`);
    if (m[1] === 'PLATFORM_ALLOWED_REDIRECT_URIS') settings.allowedRedirectUris = m[2]!.split(',');
    if (m[1] === 'PLATFORM_CIMD_PINNED_DIR' && m[2] !== '/etc/platform/cimd-pinned')
      throw new Error(`docs/connect.md (${client}): PLATFORM_CIMD_PINNED_DIR is not the mounted folder`);
  }
  if (settings.pinned.length > 0 && !/PLATFORM_CIMD_PINNED_DIR=/.test(block))
    throw new Error(`docs/connect.md (${client}): pinned documents without PLATFORM_CIMD_PINNED_DIR`);
  return settings;
}
