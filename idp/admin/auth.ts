import type { IncomingMessage } from 'node:http';
import type { IdpContext } from '../context.ts';
import { InsufficientScopeError, InvalidTokenError } from '../errors.ts';
import { ADMIN_SCOPE } from '../scopes.ts';
import { verifyOwnAccessToken } from '../tokens/jwt.ts';

/** Who is acting, as the admin audit records it. */
export interface AdminIdentity {
  email: string;
  sub: string;
  /** The client of the admin's token; `admin-console` for the console (a web session, no token). */
  clientId: string;
  /** The admin's access token id; null for the console. */
  jti: string | null;
}

const BEARER = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/i;

/**
 * The admin API's bearer check, in order: a platform access token signed by one of this provider's keys,
 * for its issuer and audience, unexpired (else 401); not revoked — jti, subject or email cut-off (401);
 * scope `platform:admin` (else 403); an email in PLATFORM_ADMIN_EMAILS now (else 403: a token minted before
 * someone was removed from the list stops working at the next restart with the new list).
 */
export async function authenticateAdmin(ctx: IdpContext, req: IncomingMessage): Promise<AdminIdentity> {
  const m = BEARER.exec(req.headers.authorization ?? '');
  if (!m)
    throw new InvalidTokenError('an access token with scope platform:admin is required as a Bearer token');
  const claims = verifyOwnAccessToken(m[1]!, ctx.keys, {
    issuer: ctx.config.issuer,
    audience: ctx.config.audience,
    leeway: 0,
  });
  if (!claims || typeof claims.iat !== 'number' || typeof claims.email !== 'string')
    throw new InvalidTokenError('the access token is invalid or expired');
  if (await ctx.revocation.isRevoked(claims)) throw new InvalidTokenError('the access token is revoked');
  const scopes = typeof claims.scope === 'string' ? claims.scope.split(' ') : [];
  if (!scopes.includes(ADMIN_SCOPE)) throw new InsufficientScopeError(`the token lacks scope ${ADMIN_SCOPE}`);
  const email = claims.email.trim().toLowerCase();
  if (!ctx.config.adminEmails.has(email))
    throw new InsufficientScopeError(`${email} is not an administrator`);
  return { email, sub: claims.sub, clientId: claims.azp, jti: claims.jti };
}
