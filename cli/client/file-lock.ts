import { open, rm, stat } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

export interface FileLockOptions {
  /** How long to wait for another process to finish before giving up. */
  waitMs?: number;
  /** A lock file older than this is left over from a crashed process and is taken over. */
  staleMs?: number;
}

/**
 * Runs `fn` while holding `<path>.lock` (created exclusively). Two `platform token` processes refreshing at
 * once would otherwise both rotate the refresh token and the later write could store the retired one, which
 * the issuer then treats as reuse and revokes the whole grant.
 */
export async function withFileLock<T>(
  path: string,
  fn: () => Promise<T>,
  opts: FileLockOptions = {},
): Promise<T> {
  const lock = `${path}.lock`;
  const waitMs = opts.waitMs ?? 15_000;
  const staleMs = opts.staleMs ?? 30_000;
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const handle = await open(lock, 'wx', 0o600);
      await handle.writeFile(String(process.pid));
      await handle.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const age = await stat(lock).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      if (age > staleMs) {
        await rm(lock, { force: true });
        continue;
      }
      if (Date.now() > deadline)
        throw new Error(`${lock} is held by another process; remove it if none is running`);
      await sleep(50 + Math.floor(Math.random() * 50));
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { force: true });
  }
}
