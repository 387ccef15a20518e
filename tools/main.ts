import type { Env } from '../lib/config.ts';

/** `platform tool <name>` — not built yet (issue 4). */
export async function main(_name: string, _env: Env): Promise<void> {
  throw new Error('platform tool is not implemented yet');
}
