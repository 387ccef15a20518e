// A fresh checkout of this working tree, as `git clone` would give a newcomer: the tracked files (and new ones
// not yet committed), nothing ignored — no .data/, no credentials, no node_modules, no .tools/.
import { execFileSync, spawn } from 'node:child_process';
import { chmod, copyFile, mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');

export async function freshCheckout(dir: string): Promise<void> {
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  })
    .split('\0')
    .filter(Boolean);
  for (const file of files) {
    const from = join(REPO_ROOT, file);
    const info = await stat(from).catch(() => undefined);
    if (!info?.isFile()) continue; // deleted in the working tree, not yet committed
    const to = join(dir, file);
    await mkdir(dirname(to), { recursive: true });
    await copyFile(from, to);
    await chmod(to, info.mode & 0o777);
  }
}

/**
 * What `make` would fetch on a first run — Node 24 under .tools/ and `npm ci` into node_modules/ (about 300 MB
 * and a minute and a half here) — taken from this checkout as hard links instead, so the test does not pay for
 * it on every run. `make` then finds them up to date and goes straight to `platform dev`, as it does on a
 * newcomer's second run. NEWCOMER_INSTALL=1 leaves them out, so `make dev` installs everything itself.
 */
export async function seedInstalledTools(dir: string, env: Readonly<Record<string, string | undefined>>) {
  if (env.NEWCOMER_INSTALL === '1') return;
  for (const sub of ['.tools', 'node_modules']) {
    await run('cp', ['-al', join(REPO_ROOT, sub), join(dir, sub)]);
  }
  // Make's marker must be newer than the copied package files; a new file (not a link to ours) is.
  await rm(join(dir, 'node_modules', '.installed'), { force: true });
  await writeFile(join(dir, 'node_modules', '.installed'), '');
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d;
    });
    child.once('error', reject);
    child.once('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} failed (${code}): ${err}`)),
    );
  });
}
