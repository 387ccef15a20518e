import { randomBytes } from 'node:crypto';
import { checkKeySet } from '../client-auth/index.ts';
import type { Exchange, IdpContext } from '../context.ts';
import { InvalidClientError, InvalidGrantError, InvalidRequestError, InvalidScopeError } from '../errors.ts';
import { knownScopes, parseScope } from '../scopes.ts';
import { ACCESS_TTL_SECONDS } from '../store/refresh-tokens.ts';
import { IAT_SQL, inTransaction, isBlockedSql, userLockShared } from '../store/transaction.ts';
import { newJti } from '../tokens/jwt.ts';

// Machine clients (docs/idp.md § Machine clients): registered by an administrator with a key set, an email they
// act as and the services they may reach; they get access tokens with the client_credentials grant
// (authenticated by private_key_jwt in idp/client-auth), never a refresh token. `type` in oauth_clients.

export const MACHINE_CLIENT_TYPE = 'machine';
export const CLIENT_CREDENTIALS = 'client_credentials';

const EMAIL = /^[^\s@\p{Cc}]{1,200}@[^\s@\p{Cc}]{1,200}$/u;
// Printable, no control characters (forwarded by the gateway as header values).
const TEXT = /^[^\p{Cc}]{1,200}$/u;
const SUBJECT = /^[\x21-\x7E]{1,512}$/;

export interface NewMachineClient {
  name: string;
  jwks?: unknown;
  jwksUri?: string;
  email: string;
  services: string[];
  workloadIssuer?: string;
  workloadSubject?: string;
  /** May exchange a user's access token for one naming it in `act` (idp/token-exchange, delegation). */
  mayAct: boolean;
}

/** The admin API body of `POST /admin/api/clients`, checked; every problem is 400 invalid_request. */
export function parseNewMachineClient(
  body: Record<string, unknown>,
  services: readonly string[],
): NewMachineClient {
  const bad = (m: string) => new InvalidRequestError(m);
  const name = typeof body.name === 'string' ? body.name.trim() : '';
  if (!TEXT.test(name)) throw bad('name must be 1-200 characters without control characters');
  if ((body.jwks === undefined) === (body.jwks_uri === undefined))
    throw bad('give exactly one of jwks (a JWK Set) and jwks_uri (an https URL)');
  let jwksUri: string | undefined;
  if (body.jwks !== undefined) {
    try {
      checkKeySet(body.jwks);
    } catch (err) {
      throw bad(`jwks ${(err as Error).message}`);
    }
  } else {
    let u: URL | undefined;
    try {
      u = typeof body.jwks_uri === 'string' ? new URL(body.jwks_uri) : undefined;
    } catch {}
    if (u?.protocol !== 'https:' || u.hash || u.username) throw bad('jwks_uri must be an https URL');
    jwksUri = u.href;
  }
  const email = typeof body.email === 'string' ? body.email.trim().toLowerCase() : '';
  if (!EMAIL.test(email)) throw bad('email must be an email address');
  const asked = body.services;
  if (!Array.isArray(asked) || asked.length === 0 || !asked.every((s) => typeof s === 'string'))
    throw bad('services must be a non-empty array of service names');
  const unknown = asked.filter((s) => !services.includes(s));
  if (unknown.length)
    throw bad(`unknown service(s): ${unknown.join(', ')} (configured: ${services.join(', ')})`);
  const wi = body.workload_issuer;
  const ws = body.workload_subject;
  if ((wi === undefined) !== (ws === undefined))
    throw bad('workload_issuer and workload_subject go together');
  if (wi !== undefined && (typeof wi !== 'string' || !SUBJECT.test(wi)))
    throw bad('workload_issuer must be 1-512 printable characters');
  if (ws !== undefined && (typeof ws !== 'string' || !SUBJECT.test(ws)))
    throw bad('workload_subject must be 1-512 printable characters');
  if (body.may_act !== undefined && typeof body.may_act !== 'boolean')
    throw bad('may_act must be true or false');
  return {
    name,
    ...(jwksUri ? { jwksUri } : { jwks: body.jwks }),
    email,
    services: [...new Set(asked as string[])],
    ...(wi !== undefined ? { workloadIssuer: wi as string, workloadSubject: ws as string } : {}),
    mayAct: body.may_act === true,
  };
}

/** Stores a machine client (its oauth_clients row and its machine_clients row); returns its client_id. */
export async function addMachineClient(ctx: IdpContext, c: NewMachineClient, by: string): Promise<string> {
  const clientId = `mc-${randomBytes(16).toString('base64url')}`;
  const metadata = {
    token_endpoint_auth_method: 'private_key_jwt',
    grant_types: [CLIENT_CREDENTIALS],
    ...(c.jwksUri ? { jwks_uri: c.jwksUri } : { jwks: c.jwks }),
  };
  await inTransaction(ctx.pool, async (tx) => {
    await tx.query(
      `INSERT INTO platform.oauth_clients (client_id, name, redirect_uris, type, metadata, auth_method)
       VALUES ($1, $2, '[]', $3, $4, 'private_key_jwt')`,
      [clientId, c.name, MACHINE_CLIENT_TYPE, JSON.stringify(metadata)],
    );
    try {
      await tx.query(
        `INSERT INTO platform.machine_clients
                (client_id, email, services, workload_issuer, workload_subject, created_by, may_act)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [clientId, c.email, c.services, c.workloadIssuer ?? null, c.workloadSubject ?? null, by, c.mayAct],
      );
    } catch (err) {
      if ((err as { code?: string }).code === '23505')
        throw new InvalidRequestError('a live machine client already has this workload issuer and subject');
      throw err;
    }
  });
  return clientId;
}

/**
 * grant_type=client_credentials (RFC 6749 §4.4) for a machine client already authenticated by private_key_jwt:
 * one transaction locks the client's row (a revocation waits for it, and one committed first is seen), takes
 * the acting email's issuance lock (revoke-user and block win likewise), and records the issuance audit.
 */
export async function clientCredentialsGrant(
  ctx: IdpContext,
  x: Exchange,
  form: ReadonlyMap<string, string>,
  clientId: string,
  jkt: string | undefined,
  /** The issuance audit's grant_type: client_credentials, or jwt-bearer for a workload assertion. */
  grantType = CLIENT_CREDENTIALS,
  /** A workload assertion's issuer, recorded in the audit. */
  assertionIssuer?: string,
): Promise<Record<string, unknown>> {
  if (form.has('refresh_token') || form.has('code'))
    throw new InvalidRequestError(`${grantType} takes no code or refresh_token`);
  const asked = parseScope(form.get('scope'));
  const issued = await inTransaction(ctx.pool, async (tx) => {
    const { rows } = await tx.query<{ email: string; services: string[]; revoked: boolean; iat: string }>(
      `SELECT email, services, revoked_at IS NOT NULL AS revoked, ${IAT_SQL} AS iat
         FROM platform.machine_clients WHERE client_id = $1 FOR SHARE`,
      [clientId],
    );
    const m = rows[0];
    if (!m || m.revoked) throw new InvalidClientError('the machine client is revoked');
    const { rows: lock } = await tx.query<{ blocked: boolean }>(
      `SELECT ${userLockShared('$1::text')}, ${isBlockedSql('$1::text')} AS blocked`,
      [m.email],
    );
    if (lock[0]?.blocked) throw new InvalidGrantError('the email this client acts as is blocked');
    const own = m.services.filter((s) => ctx.config.services.includes(s)).map((s) => `mcp:${s}`);
    // Unknown scopes are dropped; service scopes asked for narrow the client's; none asked: all of them.
    const known = knownScopes(asked, ctx.config.services).filter((s) => s.startsWith('mcp:'));
    let scope = own;
    if (known.length > 0) {
      scope = own.filter((s) => known.includes(s));
      if (scope.length === 0)
        throw new InvalidScopeError(`the client may be given only: ${own.join(' ') || '(no service)'}`);
    }
    if (scope.length === 0) throw new InvalidScopeError('none of the client’s services is configured');
    const iat = Number(m.iat);
    const jti = newJti();
    await tx.query(
      `INSERT INTO platform.issuance_audit
              (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at, assertion_issuer)
       VALUES (to_timestamp($1), $2, $3, $4, $4, $5, $4, $6, to_timestamp($1 + ${ACCESS_TTL_SECONDS}), $7)`,
      [iat, jti, grantType, clientId, m.email, scope.join(' '), assertionIssuer ?? null],
    );
    return { email: m.email, scope: scope.join(' '), iat, jti };
  });
  x.log.info({ clientId, grantType, scope: issued.scope }, 'machine token issued');
  const { issuer, audience } = ctx.config;
  return {
    access_token: ctx.keyRing.signer().accessToken({
      iss: issuer,
      sub: clientId,
      email: issued.email,
      aud: audience,
      scope: issued.scope,
      azp: clientId,
      client_id: clientId,
      jti: issued.jti,
      iat: issued.iat,
      exp: issued.iat + ACCESS_TTL_SECONDS,
      ...(jkt ? { cnf: { jkt } } : {}),
    }),
    token_type: jkt ? 'DPoP' : 'Bearer',
    expires_in: ACCESS_TTL_SECONDS,
    scope: issued.scope,
  };
}
