import * as oidc from 'openid-client';
import { type Credentials, readCredentials, writeCredentials } from './client/credentials.ts';
import { boundThumbprint, type DpopKey, loadDpopKey, tokenRequestOptions } from './client/dpop.ts';
import { CliError, LOGIN_HINT } from './client/errors.ts';
import { withFileLock } from './client/file-lock.ts';
import type { Io } from './client/io.ts';
import { describeOidcError, discoverIssuer, FROM_STORED_LOGIN, oauthErrorCode } from './client/oidc.ts';
import { credentialsFromTokens } from './client/tokens.ts';
import type { ClientConfig } from './config.ts';

/** Refresh this long before expiry, so a token handed out is still good when it reaches the gateway. */
export const REFRESH_MARGIN_SECONDS = 60;

/**
 * A usable access token: `--token` / PLATFORM_TOKEN as given (headless use, never refreshed), else the stored
 * one, refreshed first (refresh grant, rotated refresh token stored) when it expires within the margin.
 */
export async function accessToken(config: ClientConfig, io: Io): Promise<string> {
  if (config.token) return config.token;
  const creds = await readCredentials(config.credentialsPath);
  if (!creds) throw new CliError('NOT_LOGGED_IN', `not logged in: ${LOGIN_HINT}`);
  if (!needsRefresh(creds)) return creds.access_token;
  // Under the lock, read again: another process may have refreshed while this one waited.
  return withFileLock(config.credentialsPath, async () => {
    const current = await readCredentials(config.credentialsPath);
    if (!current) throw new CliError('NOT_LOGGED_IN', `not logged in: ${LOGIN_HINT}`);
    if (!needsRefresh(current)) return current.access_token;
    return (await refresh(config.credentialsPath, current, io)).access_token;
  });
}

/**
 * A new access token after the gateway refused `rejected` as revoked: refreshed now, whatever its expiry. Under
 * the lock, a stored token other than `rejected` means another process has refreshed already; that one is used.
 */
export async function renewAccessToken(config: ClientConfig, io: Io, rejected: string): Promise<string> {
  return withFileLock(config.credentialsPath, async () => {
    const current = await readCredentials(config.credentialsPath);
    if (!current) throw new CliError('NOT_LOGGED_IN', `not logged in: ${LOGIN_HINT}`);
    if (current.access_token !== rejected) return current.access_token;
    const next = await refresh(config.credentialsPath, current, io);
    if (next.access_token === rejected) {
      throw new CliError(
        'SESSION_EXPIRED',
        `the access token was revoked and could not be refreshed: ${LOGIN_HINT}`,
      );
    }
    return next.access_token;
  });
}

/** An access token and, when it is DPoP-bound, the key whose proofs must go with every use of it. */
export interface PresentedToken {
  token: string;
  dpop?: DpopKey;
}

/**
 * `accessToken()` with its proof key: the stored login's key when its tokens are bound; for `--token` /
 * PLATFORM_TOKEN, the stored key when the given token is bound to it (`cnf.jkt`), else none (Bearer).
 */
export async function presentedToken(config: ClientConfig, io: Io): Promise<PresentedToken> {
  const token = await accessToken(config, io);
  const stored = await readCredentials(config.credentialsPath).catch(() => undefined);
  if (!stored?.dpop_key || (!config.token && stored.token_type !== 'DPoP')) return { token };
  const key = await loadDpopKey(stored.dpop_key);
  if (config.token && boundThumbprint(token) !== key.thumbprint) return { token };
  return { token, dpop: key };
}

/**
 * `platform token --proof`: a fresh DPoP proof for one request (`htm` = method, `htu` = url without its query,
 * `ath` of the token). The token is the one `platform token` prints (`--token` when given), never refreshed
 * here, so a proof made right after `platform token` matches the token it printed.
 */
export async function proofFor(
  config: ClientConfig,
  request: { method: string; url: string; nonce?: string },
): Promise<string> {
  if (!/^[A-Za-z]+$/.test(request.method)) {
    throw new CliError('USAGE', `--method "${request.method}" is not an HTTP method`, { exitCode: 2 });
  }
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    throw new CliError('USAGE', `--url "${request.url}" is not an absolute URL`, { exitCode: 2 });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new CliError('USAGE', `--url "${request.url}" must be an http(s) URL`, { exitCode: 2 });
  }
  const stored = await readCredentials(config.credentialsPath);
  if (!stored && !config.token) throw new CliError('NOT_LOGGED_IN', `not logged in: ${LOGIN_HINT}`);
  const token = config.token ?? stored?.access_token ?? '';
  const key = stored?.dpop_key ? await loadDpopKey(stored.dpop_key) : undefined;
  if (!key || (config.token ? boundThumbprint(token) !== key.thumbprint : stored?.token_type !== 'DPoP')) {
    throw new CliError(
      'NOT_BOUND',
      "the token is not DPoP-bound to the stored login's key: send it as `Authorization: Bearer`, no proof needed",
    );
  }
  return key.session.buildProof({
    htm: request.method,
    htu: url,
    accessToken: token,
    ...(request.nonce ? { nonce: request.nonce } : {}),
  });
}

function needsRefresh(creds: Credentials, now = Date.now() / 1000): boolean {
  return creds.expires_at - now <= REFRESH_MARGIN_SECONDS;
}

async function refresh(path: string, creds: Credentials, io: Io): Promise<Credentials> {
  // A bound refresh token is refreshed with a proof by its key; the new tokens stay bound to it.
  const key = creds.token_type === 'DPoP' && creds.dpop_key ? await loadDpopKey(creds.dpop_key) : undefined;
  let tokens: Awaited<ReturnType<typeof oidc.refreshTokenGrant>>;
  try {
    const server = await discoverIssuer(creds.issuer, {
      clientId: creds.client_id,
      warn: io.err,
      from: FROM_STORED_LOGIN,
    });
    tokens = await oidc.refreshTokenGrant(
      server,
      creds.refresh_token,
      undefined,
      tokenRequestOptions(server, key),
    );
  } catch (err) {
    const code = oauthErrorCode(err);
    if (code !== undefined) {
      // invalid_grant: expired, revoked, or reused. Any other refusal also means the grant cannot be used.
      throw new CliError(
        'SESSION_EXPIRED',
        `the sign-in is no longer valid (${describeOidcError(err)}): ${LOGIN_HINT}`,
        {
          cause: err,
        },
      );
    }
    // The issuer is unreachable but the token has not expired yet: it is still good for a little while.
    if (creds.expires_at > Date.now() / 1000 + 5) {
      io.err(`warning: could not refresh the access token (${messageOf(err)}); it expires soon`);
      return creds;
    }
    throw new CliError('UNREACHABLE', `could not refresh the access token: ${messageOf(err)}`, {
      cause: err,
    });
  }
  const next = credentialsFromTokens(tokens, {
    issuer: creds.issuer,
    clientId: creds.client_id,
    previous: creds,
    dpop: key,
  });
  await writeCredentials(path, next);
  return next;
}

function messageOf(err: unknown): string {
  return err instanceof CliError ? err.message : describeOidcError(err);
}
