import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { isStoredDpopKey, type StoredDpopKey } from './dpop.ts';
import { CliError, LOGIN_HINT } from './errors.ts';

/** What `platform login` stores and `platform token` reads: one issuer's tokens for the CLI client. */
export interface Credentials {
  issuer: string;
  client_id: string;
  access_token: string;
  refresh_token: string;
  /** Unix seconds at which access_token expires. */
  expires_at: number;
  scope: string;
  id_token?: string;
  /** `DPoP`: the tokens are bound to `dpop_key` (every use carries a proof by it); absent or `Bearer`: not. */
  token_type?: 'DPoP' | 'Bearer';
  /** The login's own proof key (private JWK): kept here, in the one 0600 file, so it is replaced with the tokens. */
  dpop_key?: StoredDpopKey;
}

/** The stored credentials, or undefined when there is no file. A file that cannot be used is an error. */
export async function readCredentials(path: string): Promise<Credentials | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CliError('NOT_LOGGED_IN', `cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CliError('NOT_LOGGED_IN', `${path} is not valid JSON; ${LOGIN_HINT} again`);
  }
  if (!isCredentials(value))
    throw new CliError('NOT_LOGGED_IN', `${path} is incomplete; ${LOGIN_HINT} again`);
  return value;
}

function isCredentials(v: unknown): v is Credentials {
  if (typeof v !== 'object' || v === null) return false;
  const c = v as Record<string, unknown>;
  return (
    typeof c.issuer === 'string' &&
    typeof c.client_id === 'string' &&
    typeof c.access_token === 'string' &&
    typeof c.refresh_token === 'string' &&
    typeof c.expires_at === 'number' &&
    Number.isFinite(c.expires_at) &&
    typeof c.scope === 'string' &&
    (c.id_token === undefined || typeof c.id_token === 'string') &&
    (c.token_type === undefined || c.token_type === 'DPoP' || c.token_type === 'Bearer') &&
    (c.dpop_key === undefined || isStoredDpopKey(c.dpop_key)) &&
    (c.token_type !== 'DPoP' || c.dpop_key !== undefined)
  );
}

/**
 * Writes the file so that no reader ever sees half of it and no other user can read it at any moment: the
 * directory is 0700, the temporary file is created 0600 and exclusively, flushed, then renamed over the old one.
 */
export async function writeCredentials(path: string, creds: Credentials): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // mkdir's mode is ignored for a directory that already exists; this one is ours, so tighten it.
  await chmod(dir, 0o700);
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const file = await open(tmp, 'wx', 0o600);
  try {
    await file.writeFile(`${JSON.stringify(creds, null, 2)}\n`, 'utf8');
    await file.sync();
  } finally {
    await file.close();
  }
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

export async function deleteCredentials(path: string): Promise<void> {
  await rm(path, { force: true });
}
