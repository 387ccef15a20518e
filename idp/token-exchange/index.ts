import type { ConnectionUser } from '../connections/types.ts';
import type { Exchange, IdpContext } from '../context.ts';
import type { GrantRequest } from '../endpoints/grant-request.ts';
import { validateResource } from '../endpoints/resource.ts';
import {
  InteractionRequiredError,
  InvalidClientError,
  InvalidGrantError,
  InvalidRequestError,
  InvalidScopeError,
  InvalidTargetError,
  UnauthorizedClientError,
} from '../errors.ts';
import { knownScopes, parseScope, serviceScope } from '../scopes.ts';
import { ACCESS_TTL_SECONDS } from '../store/refresh-tokens.ts';
import {
  IAT_SQL,
  inTransaction,
  isBlockedSql,
  type Queryable,
  userLockShared,
} from '../store/transaction.ts';
import { type AccessTokenClaims, type Actor, newJti, verifyOwnAccessToken } from '../tokens/jwt.ts';
import { GATEWAY_CLIENT_ID } from './gateway-client.ts';

// The token exchange (RFC 8693; docs/idp.md § Token exchange). A client that authenticates presents a user's
// platform access token (`subject_token`) and names what it wants in `resource`:
// - `urn:platform:connection:<name>`: the gateway's own client gets the user's upstream access token for that
//   connection (idp/connections), so a tool behind the gateway can act as the user on a system of its own;
// - a service's MCP URL or the platform audience: a machine client registered with --may-act gets a new platform
//   access token for the same user, narrowed to its services, that names it in `act` (delegation).
// The subject token is checked as the gateways check it (signature, exp, the jti denylist, the subject's and the
// email's cut-offs, a block). Every exchange is an issuance-audit row with the subject token's jti.

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
export const CONNECTION_RESOURCE_PREFIX = 'urn:platform:connection:';

const CONNECTION_NAME = /^[a-z][a-z0-9-]{0,31}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Longer than any access token this provider signs (an `ent` claim of PLATFORM_ENT_MAX entities included). */
const MAX_SUBJECT_TOKEN_BYTES = 64 * 1024;
/** expires_in of an upstream token whose server did not say when it expires: the gateway exchanges again then. */
export const UNKNOWN_UPSTREAM_EXPIRY_SECONDS = 300;
/** How deep an exchange chain may go (a delegated token exchanged again by another machine client, …). */
export const MAX_CHAIN_DEPTH = 8;

/**
 * grant_type=urn:ietf:params:oauth:grant-type:token-exchange, for the gateway's client (a connection) or a machine
 * client (delegation); the grants table has already refused every other kind of client.
 */
export async function tokenExchangeGrant(
  ctx: IdpContext,
  x: Exchange,
  r: GrantRequest,
): Promise<Record<string, unknown>> {
  const { form } = r;
  for (const name of ['actor_token', 'actor_token_type'])
    if (form.has(name))
      throw new InvalidRequestError(`${name} is not accepted: the authenticated client is the actor`);
  const requested = form.get('requested_token_type');
  if (requested !== undefined && requested !== ACCESS_TOKEN_TYPE)
    throw new InvalidRequestError(`requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
  if (form.get('subject_token_type') !== ACCESS_TOKEN_TYPE)
    throw new InvalidRequestError(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  if (!form.get('subject_token')) throw new InvalidRequestError('subject_token is missing');
  const audience = form.get('audience');
  if (audience !== undefined && audience !== ctx.config.audience)
    throw new InvalidTargetError('audience names nothing this provider issues for: use resource');
  const resource = form.get('resource');
  if (resource === undefined)
    throw new InvalidRequestError(
      `resource is required: ${CONNECTION_RESOURCE_PREFIX}<name>, a service's MCP URL or the platform audience`,
    );
  if (resource.startsWith(CONNECTION_RESOURCE_PREFIX)) {
    if (r.kind !== 'gateway')
      throw new UnauthorizedClientError(
        `only the gateway's client (${GATEWAY_CLIENT_ID}) exchanges a token for a connection`,
      );
    return connectionToken(ctx, x, r, resource.slice(CONNECTION_RESOURCE_PREFIX.length));
  }
  if (r.kind !== 'machine')
    throw new UnauthorizedClientError(
      `the gateway's client exchanges tokens for connections only (resource ${CONNECTION_RESOURCE_PREFIX}<name>)`,
    );
  validateResource(ctx.config, resource);
  return delegatedToken(ctx, x, r);
}

/**
 * The subject token, verified as every gateway verifies a platform token (signature, issuer, audience, exp, the jti
 * denylist, the subject's and the email's cut-offs, a block); refused: 400 invalid_grant.
 */
async function verifiedSubject(
  ctx: IdpContext,
  form: ReadonlyMap<string, string>,
): Promise<AccessTokenClaims> {
  const token = form.get('subject_token')!;
  const claims =
    token.length <= MAX_SUBJECT_TOKEN_BYTES
      ? verifyOwnAccessToken(token, ctx.keyRing.published(), {
          issuer: ctx.config.issuer,
          audience: ctx.config.audience,
        })
      : undefined;
  if (
    !claims ||
    typeof claims.email !== 'string' ||
    typeof claims.iat !== 'number' ||
    typeof claims.scope !== 'string'
  )
    throw new InvalidGrantError('subject_token is not a valid, unexpired access token of this platform');
  // The gateways' leeway is for clocks that differ; this provider's clock is the one that signed it: an expired
  // subject token is exchanged for nothing.
  if (claims.exp <= Math.floor(Date.now() / 1000)) throw new InvalidGrantError('subject_token is expired');
  if (await ctx.revocation.isRevoked(claims))
    throw new InvalidGrantError('subject_token is revoked, or its user is blocked');
  return claims;
}

/** The user a subject token stands for, as the connections store knows them: the users row with its sub. */
async function connectionUser(ctx: IdpContext, subject: AccessTokenClaims): Promise<ConnectionUser> {
  const users = await ctx.sessions.findUsersByEmail(subject.email);
  const user = users.find((u) => u.sub === subject.sub);
  if (!user)
    throw new InvalidGrantError(
      'subject_token stands for no user of this platform (a machine client has no connections)',
    );
  return { userId: user.userId, email: user.email };
}

/**
 * The gateway's exchange: the user's upstream access token for the connection, refreshed first by the
 * connections store when it is about to expire; not connected (or the upstream refused the stored grant):
 * interaction_required with the URI where the user connects.
 */
async function connectionToken(
  ctx: IdpContext,
  x: Exchange,
  r: GrantRequest,
  name: string,
): Promise<Record<string, unknown>> {
  if (!CONNECTION_NAME.test(name) || !ctx.connections?.has(name))
    throw new InvalidTargetError(`no connection named "${name}" is configured`);
  const subject = await verifiedSubject(ctx, r.form);
  const subjectJti = subject.jti.toLowerCase();
  if (!UUID.test(subjectJti)) throw new InvalidGrantError('subject_token was not issued by this provider');
  const user = await connectionUser(ctx, subject);
  const upstream = await ctx.connections.accessToken(user, name);
  if (!upstream.ok) throw new InteractionRequiredError(upstream.description, upstream.connectUri);
  const now = Math.floor(Date.now() / 1000);
  const expiresIn =
    upstream.expiresAt === undefined
      ? UNKNOWN_UPSTREAM_EXPIRY_SECONDS
      : Math.max(0, Math.floor(upstream.expiresAt.getTime() / 1000) - now);
  // The audit row names what was handed out (connection, client, subject token), never the upstream token.
  await ctx.pool.query(
    `INSERT INTO platform.issuance_audit (issued_at, jti, grant_type, user_id, subject, email, client_id, scope,
                                          expires_at, subject_jti, connection)
     VALUES (to_timestamp($1), $2, $3, $4, $5, $6, $7, $8, to_timestamp($1 + $9::bigint), $10, $11)`,
    [
      now,
      newJti(),
      TOKEN_EXCHANGE_GRANT,
      user.userId,
      subject.sub,
      user.email,
      r.clientId,
      upstream.scope ?? '',
      expiresIn,
      subjectJti,
      name,
    ],
  );
  x.log.info({ clientId: r.clientId, connection: name, subjectJti }, 'connection token exchanged');
  return {
    access_token: upstream.accessToken,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: expiresIn,
    ...(upstream.scope !== undefined ? { scope: upstream.scope } : {}),
  };
}

interface MachineRow {
  email: string;
  services: string[];
  revoked: boolean;
  may_act: boolean;
}

/** The machine client's row, refused when it is revoked or was not registered to act for users. */
async function actingClient(db: Queryable, clientId: string, lock: boolean): Promise<MachineRow> {
  const { rows } = await db.query<MachineRow>(
    `SELECT email, services, revoked_at IS NOT NULL AS revoked, may_act
       FROM platform.machine_clients WHERE client_id = $1${lock ? ' FOR SHARE' : ''}`,
    [clientId],
  );
  const m = rows[0];
  if (!m || m.revoked) throw new InvalidClientError('the machine client is revoked');
  if (!m.may_act)
    throw new UnauthorizedClientError(
      'this machine client may not act for users: register it with --may-act (platform admin clients add)',
    );
  return m;
}

/**
 * Whether a token of the exchange chain that ends with `jti` is revoked by jti, or was exchanged by a machine
 * client revoked since (the chain: the token's issuance-audit row, the one it was exchanged from, …).
 */
export async function chainRevoked(db: Queryable, jti: string): Promise<boolean> {
  const { rows } = await db.query<{ revoked: boolean }>(
    `WITH RECURSIVE chain (jti, client_id, subject_jti, depth) AS (
       SELECT a.jti, a.client_id, a.subject_jti, 1 FROM platform.issuance_audit a WHERE a.jti = $1::uuid
       UNION ALL
       SELECT a.jti, a.client_id, a.subject_jti, c.depth + 1
         FROM platform.issuance_audit a JOIN chain c ON a.jti = c.subject_jti WHERE c.depth <= $2
     )
     SELECT EXISTS (SELECT 1 FROM platform.revocations v
                     WHERE v.kind = 'jti' AND v.expires_at > now()
                       AND v.value IN (SELECT jti::text FROM chain UNION SELECT $1::text))
         OR EXISTS (SELECT 1 FROM platform.machine_clients m
                     WHERE m.client_id IN (SELECT client_id FROM chain) AND m.revoked_at IS NOT NULL) AS revoked`,
    [jti, MAX_CHAIN_DEPTH],
  );
  return rows[0]?.revoked === true;
}

/** How many exchanges the subject token is already the end of (its `act` nesting). */
function actDepth(act: Actor | undefined): number {
  let n = 0;
  for (let a = act; a && typeof a === 'object'; a = a.act) n++;
  return n;
}

/**
 * Delegation: a machine client registered --may-act exchanges a user's token for a platform token for the same
 * user (sub, email, entity grants), scoped to the subject token's services that are also the client's, naming the
 * client in `act` (the subject token's `act` nested inside), expiring no later than the subject token, without a
 * refresh token. One transaction locks the client's row (revoke-client waits for it) and takes the user's
 * issuance lock (revoke-user and block win the race) and records the issuance; a revocation of the subject token
 * or of a token it was exchanged from that commits meanwhile is seen by the check after the commit (the
 * revocation denies the tokens exchanged from it only after its own commit, so one of the two sees the other).
 */
async function delegatedToken(
  ctx: IdpContext,
  x: Exchange,
  r: GrantRequest,
): Promise<Record<string, unknown>> {
  const clientId = r.clientId;
  const machine = await actingClient(ctx.pool, clientId, false);
  const subject = await verifiedSubject(ctx, r.form);
  const subjectJti = subject.jti.toLowerCase();
  if (!UUID.test(subjectJti)) throw new InvalidGrantError('subject_token was not issued by this provider');
  if (actDepth(subject.act) >= MAX_CHAIN_DEPTH)
    throw new InvalidGrantError(`subject_token was exchanged ${MAX_CHAIN_DEPTH} times already`);
  const wanted = scopeFor(ctx, r.form, subject, machine);
  const issued = await inTransaction(ctx.pool, async (tx) => {
    const m = await actingClient(tx, clientId, true);
    const { rows } = await tx.query<{ blocked: boolean; iat: string; user_id: string | null }>(
      `SELECT ${userLockShared('$1::text')}, ${isBlockedSql('$1::text')} AS blocked, ${IAT_SQL} AS iat,
              (SELECT a.user_id FROM platform.issuance_audit a WHERE a.jti = $2::uuid LIMIT 1) AS user_id`,
      [subject.email, subjectJti],
    );
    const row = rows[0]!;
    if (row.blocked) throw new InvalidGrantError('subject_token is revoked, or its user is blocked');
    if (await chainRevoked(tx, subjectJti))
      throw new InvalidGrantError('subject_token was exchanged from a revoked token or by a revoked client');
    // The client's services read again under the row lock: an administrator may have changed them.
    const scope = wanted.filter((s) => m.services.includes(s.slice('mcp:'.length)));
    if (scope.length === 0) throw new InvalidScopeError('the machine client no longer has these services');
    const iat = Number(row.iat);
    const exp = Math.min(subject.exp, iat + ACCESS_TTL_SECONDS);
    if (exp <= iat) throw new InvalidGrantError('subject_token is expired');
    const jti = newJti();
    await tx.query(
      `INSERT INTO platform.issuance_audit
              (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at, subject_jti)
       VALUES (to_timestamp($1), $2, $3, $4, $5, $6, $7, $8, to_timestamp($9), $10)`,
      [
        iat,
        jti,
        TOKEN_EXCHANGE_GRANT,
        row.user_id ?? subject.sub,
        subject.sub,
        subject.email,
        clientId,
        scope.join(' '),
        exp,
        subjectJti,
      ],
    );
    return { scope: scope.join(' '), iat, exp, jti };
  });
  // After the commit (see above): a revocation that committed meanwhile refuses this token too.
  if ((await ctx.revocation.isRevoked(subject)) || (await chainRevoked(ctx.pool, subjectJti))) {
    await ctx.revocation.revokeToken({
      jti: issued.jti,
      exp: issued.exp,
      by: 'token-exchange: subject revoked',
    });
    throw new InvalidGrantError('subject_token is revoked, or its user is blocked');
  }
  x.log.info({ clientId, sub: subject.sub, subjectJti, scope: issued.scope }, 'token exchanged (delegation)');
  const { issuer, audience } = ctx.config;
  const act: Actor = subject.act ? { sub: clientId, act: subject.act } : { sub: clientId };
  return {
    access_token: ctx.keyRing.signer().accessToken({
      iss: issuer,
      sub: subject.sub,
      email: subject.email,
      aud: audience,
      scope: issued.scope,
      azp: clientId,
      client_id: clientId,
      jti: issued.jti,
      iat: issued.iat,
      exp: issued.exp,
      act,
      ...(r.jkt ? { cnf: { jkt: r.jkt } } : {}),
      ...(subject.ent ? { ent: subject.ent } : {}),
      ...(subject.ent_overflow ? { ent_overflow: true as const } : {}),
    }),
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: r.jkt ? 'DPoP' : 'Bearer',
    expires_in: Math.max(0, issued.exp - Math.floor(Date.now() / 1000)),
    scope: issued.scope,
  };
}

/**
 * The delegated token's scope: the subject token's service scopes that are also the machine client's services
 * (a `scope` asked for narrows it further; unknown scopes are dropped). None left: invalid_scope. `resource` only
 * chooses the audience, which is the one platform audience: it narrows nothing.
 */
function scopeFor(
  ctx: IdpContext,
  form: ReadonlyMap<string, string>,
  subject: AccessTokenClaims,
  machine: MachineRow,
): string[] {
  const own = new Set(
    machine.services.filter((s) => ctx.config.services.includes(s)).map((s) => serviceScope(s)),
  );
  const carried = parseScope(subject.scope).filter((s) => own.has(s));
  if (carried.length === 0)
    throw new InvalidScopeError(
      `subject_token carries none of this machine client's services (${[...own].join(' ') || 'none'})`,
    );
  const asked = knownScopes(parseScope(form.get('scope')), ctx.config.services).filter((s) =>
    s.startsWith('mcp:'),
  );
  if (asked.length === 0) return carried;
  const kept = carried.filter((s) => asked.includes(s));
  if (kept.length === 0)
    throw new InvalidScopeError(`the scope asked for is beyond what may be delegated: ${carried.join(' ')}`);
  return kept;
}
