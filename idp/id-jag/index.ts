import { createHash } from 'node:crypto';
import { decodeJwt, errors as joseErrors, jwtVerify } from 'jose';
import { ident } from '../../lib/db.ts';
import { ASSERTION_ALGS } from '../client-auth/index.ts';
import type { Exchange, IdpContext } from '../context.ts';
import { resourceService } from '../endpoints/resource.ts';
import {
  InvalidClientError,
  InvalidGrantError,
  InvalidRequestError,
  InvalidScopeError,
  InvalidTargetError,
  OAuthError,
  TemporarilyUnavailableError,
  UnauthorizedClientError,
} from '../errors.ts';
import { JWT_BEARER_GRANT } from '../machine-clients/workload.ts';
import { countedFetches, type FetchGate } from '../outbound/index.ts';
import { knownScopes, parseScope, serviceScope } from '../scopes.ts';
import type { Client } from '../store/clients.ts';
import { ACCESS_TTL_SECONDS } from '../store/refresh-tokens.ts';
import type { SessionUser } from '../store/sessions.ts';
import { IAT_SQL, inTransaction, isBlockedSql, userLockShared } from '../store/transaction.ts';
import { newJti } from '../tokens/jwt.ts';
import { MAX_ASSERTION_BYTES, type TrustedIssuer, trustedAssertion } from '../trusted-issuers/index.ts';

// Enterprise-managed authorization (docs/idp.md § Enterprise-managed authorization): MCP's profile of the Identity
// Assertion JWT Authorization Grant. A client the user signed in to through the enterprise IdP exchanges the ID
// token there for an ID-JAG (a JWT of `typ` oauth-id-jag+jwt naming us as `aud`, the client, the MCP server as
// `resource` and the scopes the enterprise's policy allows), and redeems it here with grant_type jwt-bearer. The
// IdP must be an `id-jag` issuer of PLATFORM_TRUSTED_ISSUERS_FILE; the token is for the user the grant's email
// names (existing, unblocked, entitled), for the one service of `resource`, with the scopes both asked for and
// granted. No refresh token: the client asks the enterprise IdP for a new grant, which applies its policy again.

export const ID_JAG_TYP = 'oauth-id-jag+jwt';
/** authorization_grant_profiles_supported (draft-ietf-oauth-identity-assertion-authz-grant §7.2). */
export const ID_JAG_PROFILE = 'urn:ietf:params:oauth:grant-profile:id-jag';
/** An ID-JAG may expire at most this far ahead, and be at most this old (its jti is kept until it expires). */
const MAX_LIFETIME_SECONDS = 3600;
const CLOCK_TOLERANCE_SECONDS = 30;

/** The single-use record of an ID-JAG's jti, per issuer (docs/reference.md § Redis keys). */
export const idJagJtiKey = (issuer: string, jti: string) =>
  `platform:idjag:jti:${createHash('sha256').update(`${issuer}\0${jti}`).digest('hex')}`;

/** The trusted issuer an assertion names in `iss` (not yet verified); undefined when none or not a JWT. */
export function assertionIssuer(
  ctx: IdpContext,
  form: ReadonlyMap<string, string>,
): TrustedIssuer | undefined {
  const assertion = form.get('assertion');
  if (!assertion || assertion.length > MAX_ASSERTION_BYTES) return undefined;
  try {
    const iss = decodeJwt(assertion).iss;
    return typeof iss === 'string' ? ctx.trustedIssuers?.find(iss) : undefined;
  } catch {
    return undefined;
  }
}

interface VerifiedGrant {
  issuer: string;
  email: string;
  /** The grant's `sub`: the user at the issuer. */
  subject: string;
  /** The issuer's `subject_provider`: `subject` must be the user's account under it. */
  subjectProvider?: string;
  /** The services the grant's `resource` names. */
  services: string[];
  /** The grant's `mcp:` scopes for those services (all of them when it carries no `scope`). */
  scopes: string[];
}

/** Checks an ID-JAG as the profile requires; every refusal is an OAuth error (invalid_grant unless noted). */
async function verifyGrant(
  ctx: IdpContext,
  form: ReadonlyMap<string, string>,
  client: Client,
  gate: FetchGate,
): Promise<VerifiedGrant> {
  const { assertion, trusted } = trustedAssertion(ctx.trustedIssuers, form, 'id-jag');
  const issuer = ctx.config.issuer;
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(assertion, ctx.trustedIssuers!.keys(trusted, gate), {
      issuer: trusted.issuer,
      // Our issuer identifier, as clients and enterprise IdPs write it with or without a trailing slash.
      audience: [issuer, `${issuer}/`],
      typ: ID_JAG_TYP,
      algorithms: ASSERTION_ALGS,
      requiredClaims: ['exp', 'iat', 'jti', 'sub', 'client_id'],
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      maxTokenAge: MAX_LIFETIME_SECONDS,
    }));
  } catch (err) {
    if (err instanceof OAuthError) throw err;
    const why = err instanceof joseErrors.JOSEError ? err.message : 'the assertion could not be verified';
    throw new InvalidGrantError(`the ID-JAG is invalid: ${why}`);
  }
  const now = Math.floor(Date.now() / 1000);
  const { jti, exp } = payload as { jti: unknown; exp: number };
  if (typeof jti !== 'string' || jti === '' || jti.length > 256)
    throw new InvalidGrantError('the ID-JAG jti must be a non-empty string');
  if (exp - now > MAX_LIFETIME_SECONDS)
    throw new InvalidGrantError(`the ID-JAG must expire within ${MAX_LIFETIME_SECONDS} s`);
  // The grant names the client that redeems it (draft §4.4.1), and the issuer may be limited to some clients.
  if (payload.client_id !== client.clientId)
    throw new InvalidGrantError('the ID-JAG was issued to another client (client_id)');
  if (trusted.clients && !trusted.clients.includes(client.clientId))
    throw new UnauthorizedClientError(`this client may not redeem grants from ${trusted.issuer}`);

  // resource: the MCP server(s) the enterprise granted access to; every one must be a service of ours.
  const named = typeof payload.resource === 'string' ? [payload.resource] : payload.resource;
  if (!Array.isArray(named) || named.length === 0 || !named.every((r) => typeof r === 'string'))
    throw new InvalidGrantError('the ID-JAG names no resource (the MCP server it grants access to)');
  let services: string[];
  try {
    services = [...new Set((named as string[]).map((r) => resourceService(ctx.config, r)))];
  } catch (err) {
    throw new InvalidGrantError(`the ID-JAG ${(err as Error).message}`);
  }
  // A `resource` in the request selects one of the grant's services; another one is not the grant's target.
  const asked = form.get('resource');
  if (asked !== undefined) {
    const service = resourceService(ctx.config, asked);
    if (!services.includes(service))
      throw new InvalidTargetError(`resource "${asked}" is not the resource the ID-JAG was issued for`);
    services = [service];
  }
  const own = services.map(serviceScope);
  let scopes = own;
  if (payload.scope !== undefined) {
    if (typeof payload.scope !== 'string') throw new InvalidGrantError('the ID-JAG scope must be a string');
    const granted = new Set(parseScope(payload.scope));
    scopes = own.filter((s) => granted.has(s));
    if (scopes.length === 0)
      throw new InvalidGrantError(`the ID-JAG grants none of the resource's scopes (${own.join(' ')})`);
  }
  const emailClaim = payload[trusted.emailClaim];
  if (typeof emailClaim !== 'string' || emailClaim.trim() === '' || emailClaim.length > 320)
    throw new InvalidGrantError(`the ID-JAG carries no ${trusted.emailClaim} claim`);
  // The issuer names only its own users: an email domain it lists, or one no other issuer lists (docs/idp.md).
  const email = emailClaim.trim().toLowerCase();
  if (!ctx.trustedIssuers!.mayName(trusted, email.slice(email.lastIndexOf('@') + 1)))
    throw new InvalidGrantError(`the ID-JAG names a user outside the email domains of ${trusted.issuer}`);

  // Single use on every replica, for as long as the grant could be accepted; checked once the grant is known
  // to be this client's, so another client's attempt does not burn it.
  let first: boolean;
  try {
    first = await ctx.assertionJtis.firstUse(
      idJagJtiKey(trusted.issuer, jti),
      exp - now + 2 * CLOCK_TOLERANCE_SECONDS,
    );
  } catch {
    throw new TemporarilyUnavailableError('assertions cannot be checked right now; retry shortly');
  }
  if (!first) throw new InvalidGrantError('the ID-JAG was already used (jti)');
  return {
    issuer: trusted.issuer,
    email,
    subject: String(payload.sub),
    subjectProvider: trusted.subjectProvider,
    services,
    scopes,
  };
}

/** The scope asked for, within the grant's: unknown scopes dropped; asked, and none granted: invalid_scope. */
function grantedScope(
  ctx: IdpContext,
  form: ReadonlyMap<string, string>,
  granted: readonly string[],
): string[] {
  const asked = knownScopes(parseScope(form.get('scope')), ctx.config.services);
  if (asked.length === 0) return [...granted];
  const kept = granted.filter((s) => asked.includes(s));
  if (kept.length === 0)
    throw new InvalidScopeError(
      `the scope asked for is beyond the grant, which allows: ${granted.join(' ')}`,
    );
  return kept;
}

async function theUser(ctx: IdpContext, grant: VerifiedGrant): Promise<SessionUser> {
  const users = await ctx.sessions.findUsersByEmail(grant.email);
  if (users.length === 0)
    throw new InvalidGrantError('no user of this platform has the email the ID-JAG names');
  if (users.length > 1)
    throw new InvalidGrantError('the email the ID-JAG names belongs to more than one user');
  const user = users[0]!;
  // subject_provider: the grant's `sub` is the user's own account at this issuer (the web application's Auth.js
  // accounts row of that provider), not merely someone the issuer says has this email.
  if (grant.subjectProvider !== undefined) {
    // By (provider, providerAccountId): Auth.js's unique key, so its index answers.
    const { rows } = await ctx.pool.query<{ user_id: string }>(
      `SELECT "userId"::text AS user_id FROM ${ident(ctx.config.authjs.accountsTable)}
        WHERE provider = $1 AND "providerAccountId" = $2`,
      [grant.subjectProvider, grant.subject],
    );
    if (!rows.some((r) => r.user_id === user.userId))
      throw new InvalidGrantError(
        `the ID-JAG's sub is not the user's ${grant.subjectProvider} account (subject_provider)`,
      );
  }
  return user;
}

/**
 * grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer with an ID-JAG, for an authenticated client that is not
 * a machine client. One transaction takes the user's issuance lock (revoke-user and block win the race), reads
 * the block and the entitlements, and records the issuance audit with the assertion's issuer.
 */
export async function idJagGrant(
  ctx: IdpContext,
  x: Exchange,
  form: ReadonlyMap<string, string>,
  client: Client,
  jkt: string | undefined,
): Promise<Record<string, unknown>> {
  if ((client.authMethod ?? 'none') === 'none')
    throw new InvalidClientError(
      'an ID-JAG is redeemed by a client that authenticates (client_secret_basic, client_secret_post or private_key_jwt)',
    );
  if (form.has('refresh_token') || form.has('code'))
    throw new InvalidRequestError('the jwt-bearer grant takes no code or refresh_token');
  const grant = await verifyGrant(ctx, form, client, countedFetches(ctx.rateLimiter, x.req));
  const wanted = grantedScope(ctx, form, grant.scopes);
  const user = await theUser(ctx, grant);
  const issued = await inTransaction(ctx.pool, async (tx) => {
    const { rows } = await tx.query<{ blocked: boolean; iat: string }>(
      `SELECT ${userLockShared('$1::text')}, ${isBlockedSql('$1::text')} AS blocked, ${IAT_SQL} AS iat`,
      [user.email],
    );
    if (rows[0]?.blocked) throw new InvalidGrantError('the user is blocked');
    let scope = wanted;
    if (ctx.entitlements.mode === 'managed') {
      const entitled = await ctx.entitlements.services(user, tx);
      scope = wanted.filter((s) => entitled.has(s.slice('mcp:'.length)));
      if (scope.length === 0)
        throw new InvalidGrantError(
          `the user is not entitled to ${wanted.map((s) => s.slice(4)).join(', ')}`,
        );
    }
    const ent = await ctx.entityGrants.claims(user, tx);
    const iat = Number(rows[0]!.iat);
    const jti = newJti();
    await tx.query(
      `INSERT INTO platform.issuance_audit
              (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at, assertion_issuer)
       VALUES (to_timestamp($1), $2, $3, $4, $5, $6, $7, $8, to_timestamp($1 + ${ACCESS_TTL_SECONDS}), $9)`,
      [
        iat,
        jti,
        JWT_BEARER_GRANT,
        user.userId,
        user.sub,
        user.email,
        client.clientId,
        scope.join(' '),
        grant.issuer,
      ],
    );
    return { scope: scope.join(' '), iat, jti, ent };
  });
  x.log.info(
    { clientId: client.clientId, assertionIssuer: grant.issuer, sub: user.sub, scope: issued.scope },
    'ID-JAG redeemed',
  );
  const { issuer, audience } = ctx.config;
  return {
    access_token: ctx.keyRing.signer().accessToken({
      iss: issuer,
      sub: user.sub,
      email: user.email,
      aud: audience,
      scope: issued.scope,
      azp: client.clientId,
      client_id: client.clientId,
      jti: issued.jti,
      iat: issued.iat,
      exp: issued.iat + ACCESS_TTL_SECONDS,
      ...(jkt ? { cnf: { jkt } } : {}),
      ...issued.ent,
    }),
    token_type: jkt ? 'DPoP' : 'Bearer',
    expires_in: ACCESS_TTL_SECONDS,
    scope: issued.scope,
  };
}
