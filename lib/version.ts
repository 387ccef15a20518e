// The release a process runs: package.json's version (semantic versioning) and the commit it was built from.
// The commit comes from the image (deploy/Dockerfile writes the REVISION build argument to /app/REVISION), else
// from the checkout's git, else it is unknown. Read only when asked (`platform --version`, the start-up line),
// never on a request's path.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface Release {
  /** package.json's `version`, e.g. `1.1.0` or `1.1.0-dev`. */
  version: string;
  /** The full commit hash, or `unknown`. */
  commit: string;
}

let cached: Release | undefined;

function commitOf(root: string): string {
  try {
    const baked = readFileSync(`${root}REVISION`, 'utf8').trim();
    if (/^[0-9a-f]{7,64}$/.test(baked)) return baked;
  } catch {
    // not an image: ask git below
  }
  const git = spawnSync('git', ['-C', root, 'rev-parse', 'HEAD'], { encoding: 'utf8', timeout: 2000 });
  const head = git.status === 0 ? git.stdout.trim() : '';
  return /^[0-9a-f]{40,64}$/.test(head) ? head : 'unknown';
}

export function release(): Release {
  if (!cached) {
    const { version } = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { version: string };
    cached = { version, commit: commitOf(ROOT) };
  }
  return cached;
}

/** What `platform --version` prints: `1.1.0 (commit 0123456789ab)`. */
export function versionLine(r: Release = release()): string {
  return `${r.version} (commit ${r.commit === 'unknown' ? r.commit : r.commit.slice(0, 12)})`;
}
