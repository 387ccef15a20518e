import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { PoolClient } from '../../lib/db.ts';
import { readForm, sendJson } from '../../lib/http.ts';
import { checkRegisteredGrant } from '../client-auth/grant-types.ts';
import { authenticateClient } from '../client-auth/index.ts';
import type { IdpConfig } from '../config.ts';
import { servicesOf } from '../consent.ts';
import type { Endpoint, Exchange, IdpContext } from '../context.ts';
import { DEVICE_CODE_GRANT, hashDeviceSecret } from '../device-codes.ts';
import { type EntitlementUser, scopeAtIssuance } from '../entitlements/entitlements.ts';
import { type EntClaims, entClaims } from '../entity-grants/entity-grants.ts';
import {
  InvalidClientError,
  InvalidGrantError,
  InvalidRequestError,
  InvalidScopeError,
  OAuthError,
  UnauthorizedClientError,
  UnsupportedGrantTypeError,
} from '../errors.ts';
import { assertionIssuer, idJagGrant } from '../id-jag/index.ts';
import { CLIENT_CREDENTIALS, clientCredentialsGrant, MACHINE_CLIENT_TYPE } from '../machine-clients/index.ts';
import { JWT_BEARER_GRANT, workloadClient } from '../machine-clients/workload.ts';
import { grantTypeLabel } from '../metrics.ts';
import { entitledScope, knownScopes, parseScope } from '../scopes.ts';
import type { Client } from '../store/clients.ts';
import { hashCode } from '../store/codes.ts';
import type { Grant, RotateOutcome } from '../store/refresh-tokens.ts';
import { inTransaction } from '../store/transaction.ts';
import { TOKEN_EXCHANGE_GRANT, tokenExchangeGrant } from '../token-exchange/index.ts';
import { newJti } from '../tokens/jwt.ts';
import { deviceCodeGrant } from './device-token.ts';
import { type ClientKind, clientKind, type GrantRequest, KIND_NAMES } from './grant-request.ts';
import { checkTokenResource } from './resource.ts';
import { hashRefreshToken, newRefreshToken, tokenResponse } from './token-response.ts';

/**
 * The token endpoint's answers recorded as refusals (docs/console.md § What counts as a refusal): the grant
 * itself was refused. A malformed request, an unknown client, and a device client's polling
 * (authorization_pending, slow_down, and access_denied, recorded once when the user denied) are not.
 */
const REFUSALS: ReadonlySet<string> = new Set(['invalid_grant', 'invalid_scope', 'expired_token']);

function presentedGrant(
  form: Map<string, string>,
  grantType: string | undefined,
): { kind: 'code' | 'refresh' | 'device'; hash: string } | undefined {
  const code = form.get('code');
  const refresh = form.get('refresh_token');
  const device = form.get('device_code');
  if (grantType === 'authorization_code' && code && code.length <= 256)
    return { kind: 'code', hash: hashCode(code) };
  if (grantType === 'refresh_token' && refresh && refresh.length <= 256)
    return { kind: 'refresh', hash: hashRefreshToken(refresh) };
  if (grantType === DEVICE_CODE_GRANT && device && device.length <= 256)
    return { kind: 'device', hash: hashDeviceSecret(device) };
  return undefined;
}
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/; // RFC 7636 §4.1

/** The client a grant stands for, when the grant names it itself (jwt-bearer's workload assertions). */
type Identified = Pick<GrantRequest, 'client' | 'clientId' | 'kind' | 'workloadIssuer'>;

interface GrantType {
  /** Who may use the grant: the kinds of client (clientKind). */
  clients: readonly ClientKind[];
  /** Said in the unauthorized_client answer to any other client. */
  for: string;
  /** False: the grant is not offered (unsupported_grant_type), e.g. jwt-bearer without trusted issuers. */
  enabled?: (config: IdpConfig) => boolean;
  /** The grant needs an authenticated client: a request naming none is 401 invalid_client. */
  authenticated?: true;
  /** The client the request stands for when the grant can name it (default: the authenticated client). */
  identify?: (
    ctx: IdpContext,
    form: Map<string, string>,
    client: Client | undefined,
    req: IncomingMessage,
  ) => Promise<Identified | undefined>;
  /** The grant reads `resource` itself (token exchange: a connection's URN); else it is checked as RFC 8707's. */
  ownResource?: true;
  handle: (ctx: IdpContext, x: Exchange, r: GrantRequest) => Promise<Record<string, unknown>>;
}

const USERS_CLIENTS: readonly ClientKind[] = ['public', 'confidential'];

/**
 * The token endpoint's grants, each once: its handler and who may use it. The endpoint authenticates the
 * client, finds the grant's row, checks the client against it (clientMayUse) and dispatches.
 */
export const GRANTS: ReadonlyMap<string, GrantType> = new Map<string, GrantType>([
  [
    'authorization_code',
    {
      clients: USERS_CLIENTS,
      for: 'clients users sign in to',
      handle: (ctx, x, r) => authorizationCode(ctx, x, r.form, r.clientId, r.jkt),
    },
  ],
  [
    'refresh_token',
    {
      clients: USERS_CLIENTS,
      for: 'clients users sign in to',
      handle: (ctx, x, r) => refreshToken(ctx, x, r.form, r.clientId, r.jkt),
    },
  ],
  [
    DEVICE_CODE_GRANT,
    {
      clients: USERS_CLIENTS,
      for: 'clients users sign in to',
      handle: (ctx, x, r) => deviceCodeGrant(ctx, r.form, r.clientId, x.log, r.jkt),
    },
  ],
  [
    CLIENT_CREDENTIALS,
    {
      clients: ['machine'],
      for: 'machine clients registered by an administrator',
      handle: (ctx, x, r) => clientCredentialsGrant(ctx, x, r.form, r.clientId, r.jkt),
    },
  ],
  [
    // An ID-JAG (from an `id-jag` issuer) redeemed by an authenticated client that is not a machine client
    // (idJagGrant refuses a public one), or a workload assertion, which names its machine client itself.
    JWT_BEARER_GRANT,
    {
      clients: ['public', 'confidential', 'machine'],
      for: 'clients that redeem an ID-JAG, and machine clients presenting a workload assertion',
      enabled: (config) => config.trustedIssuersFile !== undefined,
      identify: assertionClient,
      handle: (ctx, x, r) =>
        r.workloadIssuer !== undefined
          ? clientCredentialsGrant(ctx, x, r.form, r.clientId, r.jkt, JWT_BEARER_GRANT, r.workloadIssuer)
          : idJagGrant(ctx, x, r.form, r.client!, r.jkt),
    },
  ],
  [
    // RFC 8693 (idp/token-exchange, which decides by `resource`): the gateway's client for a user's connection; a
    // machine client registered --may-act for a platform token naming it in `act`.
    TOKEN_EXCHANGE_GRANT,
    {
      clients: ['gateway', 'machine'],
      for: 'the gateway’s client and machine clients registered with --may-act',
      authenticated: true,
      ownResource: true,
      handle: tokenExchangeGrant,
    },
  ],
]);

/** The grant types discovery lists (grant_types_supported): the table's rows that the configuration offers. */
export function supportedGrantTypes(config: IdpConfig): string[] {
  return [...GRANTS].filter(([, g]) => g.enabled?.(config) ?? true).map(([t]) => t);
}

/**
 * jwt-bearer: an authenticated client that is not a machine client redeems an ID-JAG; otherwise the assertion
 * must be a workload one, and names the machine client (which, when the request also authenticates one, must be
 * the same).
 */
async function assertionClient(
  ctx: IdpContext,
  form: Map<string, string>,
  client: Client | undefined,
  req: IncomingMessage,
): Promise<Identified> {
  if (client && client.type !== MACHINE_CLIENT_TYPE)
    return { client, clientId: client.clientId, kind: clientKind(client) };
  if (assertionIssuer(ctx, form)?.kind === 'id-jag')
    throw client
      ? new UnauthorizedClientError('a machine client may not redeem an ID-JAG')
      : new InvalidClientError(
          'an ID-JAG is redeemed by an authenticated client: client authentication is missing',
        );
  // The request's address is counted for the key-set fetch this may cause (idp/outbound).
  const workload = await workloadClient(ctx, form, req);
  if (client && client.clientId !== workload.clientId)
    throw new InvalidGrantError('the assertion stands for another machine client');
  return { client, clientId: workload.clientId, kind: 'machine', workloadIssuer: workload.issuer };
}

/**
 * The one place a client is checked against the grant it uses, before the grant runs: the grant's row names the
 * kinds of client it is for.
 */
function clientMayUse(grant: GrantType, r: GrantRequest): void {
  if (!grant.clients.includes(r.kind))
    throw new UnauthorizedClientError(
      `${KIND_NAMES[r.kind]} may not use grant_type=${r.grantType}: it is for ${grant.for}`,
    );
}

/**
 * POST /oauth/token: the client authenticated (idp/client-auth: none, client_secret_post/basic,
 * private_key_jwt), its DPoP proof and `resource` checked, then the grant of GRANTS it asks for, if the client
 * may use it.
 */
export const token: Endpoint = async (ctx, x) => {
  // PLATFORM_DPOP_NONCE=on: every answer, success or error, carries the nonce to use next (RFC 9449 §8).
  ctx.dpop.offerNonce(x.res);
  const form = await readForm(x.req);
  const grantType = form.get('grant_type');
  // The client-authentication edge (idp/client-auth): none, client_secret_post/basic, private_key_jwt.
  const client = await authenticateClient(ctx, x, form);
  const found = grantType === undefined ? undefined : GRANTS.get(grantType);
  const grant = found && (found.enabled?.(ctx.config) ?? true) ? found : undefined;
  // The client's own registration (RFC 7591 grant_types) first: before a grant names its client or fetches a key.
  checkRegisteredGrant(client, grantType);
  const who: Identified | undefined = grant?.identify
    ? await grant.identify(ctx, form, client, x.req)
    : client && { client, clientId: client.clientId, kind: clientKind(client) };
  if (!who) {
    if (grant?.authenticated)
      throw new InvalidClientError(`grant_type=${grantType} needs client authentication`);
    throw new InvalidRequestError('client_id is required (or client authentication)');
  }
  const clientId = who.clientId;
  // DPoP (idp/dpop): a valid proof binds what this request issues to its key; jkt undefined: no proof.
  const jkt = await ctx.dpop.tokenProof(x);
  if (!jkt && who.client?.dpopBoundAccessTokens)
    throw new OAuthError(
      'invalid_dpop_proof',
      'this client is registered with dpop_bound_access_tokens: a DPoP proof is required',
    );
  // RFC 8707's resource, bound to what a code or refresh token was granted for (resource.ts); token exchange reads
  // its own (a connection's URN).
  if (!grant?.ownResource) await checkTokenResource(ctx, form, grantType, clientId);
  if (!grantType) throw new InvalidRequestError('grant_type is missing');
  if (!grant) throw new UnsupportedGrantTypeError(`grant_type ${grantType} is not supported`);
  const request: GrantRequest = { grantType, form, ...who, jkt };
  clientMayUse(grant, request);

  let body: Record<string, unknown>;
  try {
    body = await grant.handle(ctx, x, request);
  } catch (err) {
    const outcome = err instanceof OAuthError ? err.error : 'server_error';
    ctx.metrics?.grants.inc({ grant_type: grantTypeLabel(grantType), outcome });
    if (err instanceof OAuthError && REFUSALS.has(err.error)) {
      await ctx.refusals.record(
        {
          source: 'token',
          error: err.error,
          reason: err.message,
          clientId,
          grantType,
          requestId: x.requestId,
          presented: presentedGrant(form, grantType),
        },
        x.log,
      );
    }
    throw err;
  }
  ctx.metrics?.grants.inc({ grant_type: grantTypeLabel(grantType), outcome: 'ok' });
  sendJson(x.res, 200, body, { 'cache-control': 'no-store', pragma: 'no-cache' });
};

async function authorizationCode(
  ctx: IdpContext,
  x: Exchange,
  form: Map<string, string>,
  clientId: string,
  jkt: string | undefined,
) {
  const code = form.get('code');
  const verifier = form.get('code_verifier');
  const redirectUri = form.get('redirect_uri');
  if (!code) throw new InvalidRequestError('code is missing');
  if (!verifier) throw new InvalidRequestError('code_verifier is missing (PKCE is mandatory)');
  if (!VERIFIER.test(verifier))
    throw new InvalidRequestError('code_verifier must be 43-128 unreserved characters');
  if (!redirectUri) throw new InvalidRequestError('redirect_uri is missing');
  if (code.length > 256) throw new InvalidGrantError('authorization code is invalid');

  const hash = hashCode(code);
  const challenge = createHash('sha256').update(verifier).digest();
  // One transaction: the user lock, the code consumed (burned by any failure below: the commit keeps that),
  // the entitlements read (grant rows locked) and the family created (docs/idp.md § Revocation).
  const out = await inTransaction(ctx.pool, async (tx) => {
    const refused = (message: string, replayedFamily?: string) => ({
      error: new InvalidGrantError(message),
      replayedFamily,
    });
    if (!(await ctx.codes.lockUser(tx, hash))) return refused('authorization code is invalid');
    const rec = await ctx.codes.consume(tx, hash);
    if (!rec) return refused('authorization code is invalid');
    // Consumed by revoke-user: not a replay by the client, so its family (if any) is not the point.
    if (rec.revoked) return refused('authorization code was revoked');
    // RFC 6749 §4.1.2: a replayed code revokes what it issued.
    if (!rec.firstUse) return refused('authorization code was already used', rec.familyId);
    if (rec.expired) return refused('authorization code is expired');
    if (rec.clientId !== clientId) return refused('authorization code was issued to another client');
    if (rec.redirectUri !== redirectUri)
      return refused('redirect_uri does not match the authorization request');
    const expected = Buffer.from(rec.codeChallenge, 'base64url');
    if (expected.length !== challenge.length || !timingSafeEqual(challenge, expected))
      return refused('code_verifier does not match the code_challenge');
    // RFC 9449 §10: a code requested with dpop_jkt is exchanged only with a proof by that key.
    if (rec.dpopJkt !== undefined && rec.dpopJkt !== jkt)
      return refused('authorization code is bound to a DPoP key (dpop_jkt): a proof by that key is required');
    if (rec.blocked) return refused('the user is blocked');
    const scope = await scopeAtIssuance(ctx.entitlements, rec.scope, rec, tx);
    const ent = await ctx.entityGrants.claims(rec, tx);
    const grant: Grant = {
      familyId: rec.familyId,
      userId: rec.userId,
      subject: rec.subject,
      email: rec.email,
      clientId,
      scope,
      authTime: rec.authTime,
      emailVerified: rec.emailVerified,
      dpopJkt: jkt,
    };
    const jti = newJti();
    const refresh = newRefreshToken();
    await ctx.refreshTokens.issue(tx, grant, refresh.token, {
      jti,
      grantType: 'authorization_code',
      iat: rec.iat,
    });
    return { rec, grant, jti, refresh, ent };
  });
  if ('error' in out) {
    if (out.replayedFamily) {
      await ctx.revocation.revokeFamily({
        familyId: out.replayedFamily,
        by: 'authorization code replayed',
        reason: 'authorization code replayed',
        quiet: true,
      });
    }
    throw out.error;
  }
  const { rec, grant, jti, refresh, ent } = out;
  await noteNoService(ctx, x, {
    asked: rec.scope,
    given: grant.scope,
    email: rec.email,
    subject: rec.subject,
    clientId,
    grantType: 'authorization_code',
  });
  return tokenResponse(ctx, {
    grant,
    scope: grant.scope,
    jti,
    iat: rec.iat,
    refreshToken: refresh.value,
    nonce: rec.nonce,
    dpopJkt: jkt,
    ent,
  });
}

async function refreshToken(
  ctx: IdpContext,
  x: Exchange,
  form: Map<string, string>,
  clientId: string,
  jkt: string | undefined,
) {
  const presented = form.get('refresh_token');
  if (!presented) throw new InvalidRequestError('refresh_token is missing');
  if (presented.length > 256) throw new InvalidGrantError('refresh token is invalid');
  // Unknown scopes are dropped; a scope that names nothing known (or none) keeps the grant's.
  const asked = knownScopes(parseScope(form.get('scope')), ctx.config.services);
  const narrowed = asked.length > 0 ? asked : undefined;
  const hash = hashRefreshToken(presented);
  const jti = newJti();
  const refresh = newRefreshToken();
  const rotate = (scope: string[] | undefined, tx?: PoolClient) =>
    ctx.refreshTokens.rotate(
      hash,
      clientId,
      refresh.token,
      { jti, grantType: 'refresh_token', scope: scope?.join(' '), dpopJkt: jkt },
      tx,
    );

  let scope = narrowed;
  let entitled: Awaited<ReturnType<typeof entitledRefreshScope>> | undefined;
  let outcome: RotateOutcome;
  let ent: EntClaims = {};
  // Managed entitlements: the token's holder (undefined for an unknown token, which rotate() answers with
  // invalid_grant), then one transaction whose start is the iat: the grant rows (services and entities) read and
  // locked, and the rotation (docs/idp.md § Revocation).
  const holder = ctx.entitlements.mode === 'managed' ? await ctx.entitlements.refreshHolder(hash) : undefined;
  if (holder) {
    scope = narrowed && withinGrant(narrowed, holder.scope);
    outcome = await inTransaction(ctx.pool, async (tx) => {
      entitled = await entitledRefreshScope(ctx, holder, scope, tx);
      scope = entitled.scope;
      ent = await ctx.entityGrants.claims(holder, tx);
      return rotate(scope, tx);
    });
  } else {
    // Open entitlements: the rotation is one statement, and the entity grants are read after it committed. That
    // is as safe as reading them inside it: the token's iat is the rotation's start, so an entity ungrant that
    // commits after this read writes a cut-off (its search finds the rotation's audit row) at or after the iat,
    // and one that committed before the read is not in the claim. The common refresh keeps its one statement.
    outcome = await rotate(narrowed);
    if (outcome.kind === 'scope_exceeded' && narrowed) {
      scope = withinGrant(narrowed, outcome.grantScope);
      outcome = await rotate(scope);
    }
    // Read in the rotating statement when the store could (no roles to match): the same rows, one round trip.
    if (outcome.kind === 'rotated')
      ent =
        outcome.entRows !== undefined
          ? entClaims(outcome.entRows, ctx.entityGrants.max)
          : await ctx.entityGrants.claims(outcome.grant, ctx.pool);
  }
  if (outcome.kind === 'invalid') throw new InvalidGrantError(outcome.reason);
  if (outcome.kind === 'reuse') {
    x.log.warn({ sub: outcome.grant.subject, clientId }, 'refresh token reuse: family revoked');
    ctx.metrics?.refreshReuse.inc();
    // The family is revoked; its live access tokens are denied too.
    await ctx.revocation.revokeFamily({
      familyId: outcome.grant.familyId,
      by: 'refresh token reuse',
      reason: 'reuse detected',
      quiet: true,
    });
    throw new InvalidGrantError('refresh token was already used; the grant is revoked');
  }
  // RFC 6749 §6: never wider than the grant (the grant changed under a concurrent request: refused, nothing rotated).
  if (outcome.kind === 'scope_exceeded') throw new InvalidScopeError('scope exceeds the original grant');
  if (entitled?.narrowed) {
    await noteNoService(ctx, x, {
      asked: entitled.asked,
      given: entitled.scope?.join(' ') ?? '',
      clientId,
      grantType: 'refresh_token',
      presented: hash,
    });
  }
  const grant = outcome.grant;
  return tokenResponse(ctx, {
    grant,
    scope: scope?.join(' ') ?? grant.scope,
    jti,
    iat: outcome.iat,
    refreshToken: refresh.value,
    nonce: undefined,
    // A bound family: its key (the proof's, checked by rotate). An unbound one with a proof: the access token
    // is bound, the refresh token stays unbound (binding is decided once, when the sign-in is issued).
    dpopJkt: grant.dpopJkt ?? jkt,
    ent,
  });
}

/**
 * A refresh's asked scope within the grant's (RFC 6749 §6: never wider): scopes the grant lacks are dropped;
 * when none is left, undefined (the grant's scope).
 */
function withinGrant(asked: readonly string[], grantScope: string): string[] | undefined {
  const granted = new Set(grantScope.split(' '));
  const kept = asked.filter((s) => granted.has(s));
  return kept.length > 0 ? kept : undefined;
}

/**
 * Managed entitlements: the refreshed access token carries only the services the user is entitled to now (an
 * ungrant cuts the live tokens; this is what the client gets when it refreshes). The refresh token keeps its
 * scope, so a grant given back later returns with the next refresh. Read inside the rotation's transaction.
 */
async function entitledRefreshScope(
  ctx: IdpContext,
  holder: EntitlementUser & { scope: string },
  asked: string[] | undefined,
  tx: PoolClient,
): Promise<{ scope: string[] | undefined; asked: string; narrowed: boolean }> {
  const wanted = asked?.join(' ') ?? holder.scope;
  const entitled = entitledScope(wanted, await ctx.entitlements.services(holder, tx));
  return entitled === holder.scope
    ? { scope: asked, asked: wanted, narrowed: false }
    : { scope: entitled.split(' ').filter((s) => s !== ''), asked: wanted, narrowed: true };
}

/**
 * Managed entitlements: a grant asked for services and the user is entitled to none of them now. The token is
 * still issued (without them), and the refusal of the services is recorded (docs/console.md).
 */
async function noteNoService(
  ctx: IdpContext,
  x: Exchange,
  o: {
    asked: string;
    given: string;
    email?: string;
    subject?: string;
    clientId: string;
    grantType: string;
    presented?: string;
  },
): Promise<void> {
  const asked = servicesOf(o.asked);
  if (asked.length === 0 || servicesOf(o.given).length > 0) return;
  await ctx.refusals.record(
    {
      source: 'token',
      error: 'no_entitled_service',
      reason: `none of the services asked for (${asked.join(', ')}) is granted to the user`,
      email: o.email,
      subject: o.subject,
      clientId: o.clientId,
      grantType: o.grantType,
      requestId: x.requestId,
      presented: o.presented ? { kind: 'refresh', hash: o.presented } : undefined,
    },
    x.log,
  );
}
