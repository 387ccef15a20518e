// The refresh-token store driven directly (no IdP): a fresh family, a rotation of its token.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { hashRefreshToken, newRefreshToken } from '../../idp/endpoints/token-response.ts';
import type { Grant, NewToken, RefreshTokenStore, RotateOutcome } from '../../idp/store/refresh-tokens.ts';
import { inTransaction } from '../../idp/store/transaction.ts';

/** A fresh family for `email` (its sign-in's grant overridable); its refresh token's hash. */
export async function issueFamily(
  pool: pg.Pool,
  store: RefreshTokenStore,
  email: string,
  grant: Partial<Grant> = {},
): Promise<string> {
  const g: Grant = {
    familyId: randomUUID(),
    userId: randomUUID(),
    subject: randomUUID(),
    email,
    clientId: 'platform-cli',
    scope: 'openid email mcp:deals',
    authTime: Math.floor(Date.now() / 1000),
    emailVerified: true,
    ...grant,
  };
  const t = newRefreshToken();
  await inTransaction(pool, (tx) =>
    store.issue(tx, g, t.token, {
      jti: randomUUID(),
      grantType: 'authorization_code',
      iat: Math.floor(Date.now() / 1000),
    }),
  );
  return hashRefreshToken(t.value);
}

/** Rotates the token `hash` names as platform-cli (or `clientId`); the outcome and the successor's hash. */
export async function rotateToken(
  store: RefreshTokenStore,
  hash: string,
  opts: { clientId?: string; dpopJkt?: string; next?: NewToken } = {},
): Promise<{ out: RotateOutcome; next: string }> {
  const next = opts.next ?? newRefreshToken().token;
  const out = await store.rotate(hash, opts.clientId ?? 'platform-cli', next, {
    jti: randomUUID(),
    grantType: 'refresh_token',
    ...(opts.dpopJkt ? { dpopJkt: opts.dpopJkt } : {}),
  });
  return { out, next: next.hash };
}
