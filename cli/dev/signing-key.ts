import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * The development signing key: generated on first start, then reused, so tokens and the published kid survive
 * restarts (a stored `platform login` keeps working). PKCS8 PEM, readable by this user only.
 */
export async function loadOrCreateDevSigningKey(path: string): Promise<{ pem: string; created: boolean }> {
  const existing = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (existing !== undefined) {
    await chmod(path, 0o600);
    return { pem: existing, created: false };
  }
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const pem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;
  try {
    // 'wx': two starts racing must not each write a different key; the loser reads the winner's.
    await writeFile(path, pem, { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST')
      return { pem: await readFile(path, 'utf8'), created: false };
    throw err;
  }
  return { pem, created: true };
}

/**
 * The development AUTH_SECRET of `platform dev --session jwt`: generated on first use, then reused, so the
 * JWT-strategy session cookies the sign-in page set survive restarts. Readable by this user only.
 */
export async function loadOrCreateDevSecret(path: string): Promise<string> {
  const existing = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (existing !== undefined) return existing.trim();
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const secret = randomBytes(32).toString('base64url');
  try {
    await writeFile(path, secret, { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return (await readFile(path, 'utf8')).trim();
    throw err;
  }
  return secret;
}
