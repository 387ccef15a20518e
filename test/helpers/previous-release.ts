// The previous release, as an operator has it: the commit CHANGELOG.md names for the newest release, taken from
// this repository's history into a folder of its own (git archive), with its dependencies. What the upgrade
// tests run beside the current code.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_DIR = fileURLToPath(new URL('../..', import.meta.url));

export interface ReleaseEntry {
  version: string;
  date: string;
  /** The commit the changelog names for it (abbreviated or full). */
  commit: string;
}

/**
 * The releases CHANGELOG.md lists, newest first: each `## <semver> — <date>` heading and the first commit named
 * in backquotes in its section (a release without one is an error: an operator could not pin it).
 */
export function releasesOf(changelog: string): ReleaseEntry[] {
  const out: ReleaseEntry[] = [];
  const sections = changelog.split(/^## /m).slice(1);
  for (const s of sections) {
    const m = /^(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?) — (\d{4}-\d{2}-\d{2})\s*$/m.exec(s.split('\n')[0] ?? '');
    if (!m) continue;
    const commit = /commit\s+`([0-9a-f]{7,40})`/i.exec(s)?.[1];
    if (!commit) throw new Error(`CHANGELOG.md: release ${m[1]} names no commit`);
    out.push({ version: m[1]!, date: m[2]!, commit });
  }
  return out;
}

export interface PreviousRelease extends ReleaseEntry {
  dir: string;
  /** Its `bin/platform.js`, to run with this Node. */
  bin: string;
  /** How its dependencies were provided: this checkout's node_modules (the same versions) or its own `npm ci`. */
  dependencies: 'shared' | 'installed';
  remove(): void;
}

/** name@version of every package a package-lock.json (v2/v3) installs. */
function lockedPackages(lockText: string): Map<string, string> {
  const lock = JSON.parse(lockText) as { packages?: Record<string, { version?: string }> };
  const out = new Map<string, string>();
  for (const [path, p] of Object.entries(lock.packages ?? {}))
    if (path.startsWith('node_modules/') && p.version) out.set(path, p.version);
  return out;
}

/**
 * The newest release of CHANGELOG.md checked out into a temporary folder. Its dependencies are this checkout's
 * node_modules when every package its lock file installs is installed here at the same version (true while the
 * releases differ only by added packages), else its own `npm ci`.
 */
export function checkoutPreviousRelease(): PreviousRelease {
  const [newest] = releasesOf(readFileSync(join(REPO_DIR, 'CHANGELOG.md'), 'utf8'));
  if (!newest) throw new Error('CHANGELOG.md lists no release');
  const known = spawnSync('git', ['-C', REPO_DIR, 'cat-file', '-e', `${newest.commit}^{commit}`]);
  if (known.status !== 0)
    throw new Error(
      `release ${newest.version}'s commit ${newest.commit} is not in this clone's history (a shallow clone? git fetch --unshallow)`,
    );
  const dir = mkdtempSync(join(tmpdir(), `platform-release-${newest.version}-`));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    const archive = execFileSync('git', ['-C', REPO_DIR, 'archive', '--format=tar', newest.commit], {
      maxBuffer: 1 << 30,
    });
    execFileSync('tar', ['-x', '-C', dir], { input: archive });
    const theirs = lockedPackages(readFileSync(join(dir, 'package-lock.json'), 'utf8'));
    const ours = lockedPackages(readFileSync(join(REPO_DIR, 'package-lock.json'), 'utf8'));
    const same = [...theirs].every(([path, version]) => ours.get(path) === version);
    let dependencies: PreviousRelease['dependencies'] = 'shared';
    if (same && existsSync(join(REPO_DIR, 'node_modules'))) {
      symlinkSync(join(REPO_DIR, 'node_modules'), join(dir, 'node_modules'));
    } else {
      execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
        cwd: dir,
        stdio: 'ignore',
        timeout: 600_000,
      });
      dependencies = 'installed';
    }
    return { ...newest, dir, bin: join(dir, 'bin', 'platform.js'), dependencies, remove };
  } catch (err) {
    remove();
    throw err;
  }
}
