import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { timeSliced } from '../../lib/time-slice.ts';
import type { IdpContext } from '../context.ts';
import type { EntClaims } from '../entity-grants/entity-grants.ts';
import { ADMIN_SCOPE, adminPowers, withinPowers } from '../scopes.ts';
import { ACCESS_TTL_SECONDS, type Grant, type NewToken } from '../store/refresh-tokens.ts';

// What every grant of the token endpoint shares (authorization code, refresh, device code): new refresh
// tokens and the token response. Its own module so the grants import it rather than each other.

export function hashRefreshToken(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

export function newRefreshToken(): { value: string; token: NewToken } {
  const value = randomBytes(32).toString('base64url');
  return { value, token: { id: randomUUID(), hash: hashRefreshToken(value) } };
}

export interface TokenResponseOptions {
  grant: Grant;
  scope: string;
  jti: string;
  iat: number;
  refreshToken: string;
  nonce: string | undefined;
  /** The DPoP key the access token is bound to (`cnf.jkt`, token_type DPoP); undefined: a Bearer token. */
  dpopJkt: string | undefined;
  /** The user's entity grants, read in the issuance's transaction. */
  ent: EntClaims;
}

/**
 * The grants' signatures run in slices of the event loop of about SIGNING_SLICE_MS (lib/time-slice.ts): a few
 * grants' worth (a grant's two RS256 signatures take ~0.6 ms of a core), then a turn for the requests that arrived
 * meanwhile. Measured in docs/performance.md; 3 ms read about the same (one run), 6 ms a little lower (two).
 */
const SIGNING_SLICE_MS = 4;
const signing = timeSliced(SIGNING_SLICE_MS);

/** The token response of a grant: its access token and (scope openid) id_token signed, in a signing slice. */
export function tokenResponse(ctx: IdpContext, o: TokenResponseOptions): Promise<Record<string, unknown>> {
  return signing(() => signedResponse(ctx, o));
}

function signedResponse(ctx: IdpContext, o: TokenResponseOptions): Record<string, unknown> {
  const { grant, jti, iat, refreshToken, nonce, dpopJkt } = o;
  const exp = iat + ACCESS_TTL_SECONDS;
  const { issuer, audience } = ctx.config;
  // The admin list (or the user's email) may have changed since the grant was made.
  let scope = withinPowers(
    o.scope,
    adminPowers(ctx.config, { email: grant.email, clientId: grant.clientId }),
  );
  // PLATFORM_ADMIN_REQUIRE_DPOP=on: an administrator's power only on a sign-in bound from its start to one key
  // (the family's key, grant.dpopJkt), never on this response's key alone: an unbound (Bearer or --no-dpop)
  // sign-in's refresh token presented with a proof by any key — a thief's — must not gain platform:admin.
  if (ctx.config.adminRequireDpop && !(grant.dpopJkt && grant.dpopJkt === dpopJkt))
    scope = scope
      .split(' ')
      .filter((s) => s !== ADMIN_SCOPE)
      .join(' ');
  const body: Record<string, unknown> = {
    access_token: ctx.keyRing.signer().accessToken({
      iss: issuer,
      sub: grant.subject,
      email: grant.email,
      aud: audience,
      scope,
      azp: grant.clientId,
      client_id: grant.clientId,
      jti,
      iat,
      exp,
      ...(dpopJkt ? { cnf: { jkt: dpopJkt } } : {}),
      ...o.ent,
    }),
    token_type: dpopJkt ? 'DPoP' : 'Bearer',
    expires_in: ACCESS_TTL_SECONDS,
    refresh_token: refreshToken,
    scope,
  };
  const scopes = scope.split(' ');
  if (scopes.includes('openid')) {
    body.id_token = ctx.keyRing.signer().idToken({
      iss: issuer,
      sub: grant.subject,
      aud: grant.clientId,
      azp: grant.clientId,
      iat,
      exp,
      auth_time: grant.authTime,
      ...(nonce !== undefined ? { nonce } : {}),
      ...(scopes.includes('email') ? { email: grant.email, email_verified: grant.emailVerified } : {}),
    });
  }
  return body;
}
