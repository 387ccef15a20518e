import type { Exchange, IdpContext } from '../context.ts';
import { parseAuthorization } from '../dpop/index.ts';
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

/**
 * The admin API's token check, in order: a platform access token signed by one of this provider's keys,
 * for its issuer and audience, unexpired (else 401); as DPoP with a valid proof by its key when DPoP-bound,
 * else as Bearer (401); not revoked — jti, subject or email cut-off (401);
 * scope `platform:admin` (else 403), in a DPoP-bound token while PLATFORM_ADMIN_REQUIRE_DPOP is on (else 403:
 * the unbound admin tokens issued before the switch was turned on); an email in PLATFORM_ADMIN_EMAILS now (else 403: a token minted before
 * someone was removed from the list stops working at the next restart with the new list).
 */
export async function authenticateAdmin(ctx: IdpContext, x: Exchange): Promise<AdminIdentity> {
  const presented = parseAuthorization(x.req.headers.authorization ?? '');
  if (!presented)
    throw new InvalidTokenError(
      'an access token with scope platform:admin is required as a Bearer or DPoP token',
    );
  const claims = verifyOwnAccessToken(presented.token, ctx.keyRing.published(), {
    issuer: ctx.config.issuer,
    audience: ctx.config.audience,
    leeway: 0,
  });
  if (!claims || typeof claims.iat !== 'number' || typeof claims.email !== 'string')
    throw new InvalidTokenError('the access token is invalid or expired');
  // DPoP (idp/dpop): a bound token needs the DPoP scheme and a proof for this URL by its key. Its single use is
  // recorded in Postgres (idp/store/dpop-proofs.ts), so an administrator can still revoke while Redis is away.
  await ctx.adminDpop.checkSender(x, { ...presented, jkt: claims.cnf?.jkt });
  if (await ctx.revocation.isRevoked(claims)) throw new InvalidTokenError('the access token is revoked');
  const scopes = typeof claims.scope === 'string' ? claims.scope.split(' ') : [];
  if (!scopes.includes(ADMIN_SCOPE)) throw new InsufficientScopeError(`the token lacks scope ${ADMIN_SCOPE}`);
  // PLATFORM_ADMIN_REQUIRE_DPOP=on also cuts the unbound admin tokens issued before it was turned on.
  if (ctx.config.adminRequireDpop && claims.cnf?.jkt === undefined)
    throw new InsufficientScopeError(
      `PLATFORM_ADMIN_REQUIRE_DPOP is on: ${ADMIN_SCOPE} needs a DPoP-bound token (sign in again without --no-dpop)`,
    );
  const email = claims.email.trim().toLowerCase();
  if (!ctx.config.adminEmails.has(email))
    throw new InsufficientScopeError(`${email} is not an administrator`);
  return { email, sub: claims.sub, clientId: claims.azp, jti: claims.jti };
}
