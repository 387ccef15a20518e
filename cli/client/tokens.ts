import type * as oidc from 'openid-client';
import type { Credentials } from './credentials.ts';
import type { DpopKey } from './dpop.ts';
import { CliError } from './errors.ts';

type TokenResponse = oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers;

/**
 * The stored form of a token endpoint answer. On a refresh, `previous` fills what the answer may leave out:
 * RFC 6749 §6 lets the server keep the old refresh token and scope, and an id_token is not always re-issued.
 */
export function credentialsFromTokens(
  tokens: TokenResponse,
  ctx: { issuer: string; clientId: string; previous?: Credentials; dpop?: DpopKey; now?: number },
): Credentials {
  const now = ctx.now ?? Math.floor(Date.now() / 1000);
  const refresh = tokens.refresh_token ?? ctx.previous?.refresh_token;
  if (!refresh) throw new CliError('LOGIN_FAILED', 'the issuer returned no refresh token');
  const idToken = tokens.id_token ?? ctx.previous?.id_token;
  // openid-client lowercases token_type. A proof the issuer ignored leaves plain bearer tokens: no key to keep.
  const bound = tokens.token_type === 'dpop';
  if (bound && !ctx.dpop)
    throw new CliError('LOGIN_FAILED', 'the issuer answered DPoP to a request without a proof');
  return {
    issuer: ctx.issuer,
    client_id: ctx.clientId,
    access_token: tokens.access_token,
    refresh_token: refresh,
    expires_at: expiresAt(tokens, now),
    scope: tokens.scope ?? ctx.previous?.scope ?? '',
    ...(idToken ? { id_token: idToken } : {}),
    ...(bound && ctx.dpop ? { token_type: 'DPoP' as const, dpop_key: ctx.dpop.stored } : {}),
  };
}

function expiresAt(tokens: TokenResponse, now: number): number {
  const inSeconds = tokens.expiresIn();
  if (inSeconds !== undefined) return now + inSeconds;
  // No expires_in: read the JWT's own exp; failing that, treat it as expired so the next use refreshes.
  try {
    const payload = JSON.parse(
      Buffer.from(tokens.access_token.split('.')[1] ?? '', 'base64url').toString('utf8'),
    );
    if (typeof payload.exp === 'number') return payload.exp;
  } catch {
    // opaque token
  }
  return now;
}
