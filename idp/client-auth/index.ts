import { decodeJwt, errors as joseErrors, jwtVerify } from 'jose';
import type { Pool } from '../../lib/db.ts';
import { countedFetches } from '../cimd/index.ts';
import type { Exchange, IdpContext } from '../context.ts';
import { InvalidClientError, InvalidRequestError } from '../errors.ts';
import type { Client } from '../store/clients.ts';
import { secretMatches } from './secrets.ts';

export { type ClientKeySets, checkKeySet, createClientKeySets } from './key-sets.ts';
export { AUTH_METHODS, type AuthMethod, isAuthMethod } from './methods.ts';
export { hashClientSecret, newClientSecret } from './secrets.ts';
export const SECRET_METHODS: ReadonlySet<string> = new Set(['client_secret_post', 'client_secret_basic']);

/** RFC 7523 §2.2. */
export const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** Signing algorithms accepted on client assertions (discovery's token_endpoint_auth_signing_alg_values_supported). */
export const ASSERTION_ALGS = ['RS256', 'PS256', 'ES256', 'ES384', 'EdDSA'];
/** An assertion may live at most this long (its jti is kept until it expires). */
const MAX_ASSERTION_SECONDS = 3600;
const CLOCK_TOLERANCE_SECONDS = 30;

type Presented =
  | { kind: 'none'; clientId: string }
  | {
      kind: 'secret';
      clientId: string;
      secret: string;
      /** Basic: the secret as sent, when form-decoding changed it (a client that did not form-encode it). */
      raw?: string;
      via: 'basic' | 'post';
    }
  | { kind: 'assertion'; clientId: string; assertion: string };

/** RFC 6749 §2.3.1: the Basic credentials are form-encoded before base64. */
function formDecode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    throw new InvalidClientError('the Basic credentials are not form-encoded');
  }
}

function basicCredentials(
  header: string | undefined,
): { clientId: string; secret: string; raw?: string } | undefined {
  if (!header || !/^basic /i.test(header)) return undefined;
  const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) throw new InvalidClientError('the Basic credentials are malformed');
  const raw = decoded.slice(colon + 1);
  // Many clients send the secret without form-encoding it; a secret of base64 characters (`+`, `/`, `=`, as
  // `openssl rand -base64` makes for PLATFORM_GATEWAY_CLIENT_SECRET) then decodes differently: both are tried.
  let secret = raw;
  try {
    secret = formDecode(raw);
  } catch {}
  return { clientId: formDecode(decoded.slice(0, colon)), secret, ...(secret !== raw ? { raw } : {}) };
}

/** What the request presents, checked for shape only. One method at most (RFC 6749 §2.3). */
function presented(x: Exchange, form: ReadonlyMap<string, string>): Presented | undefined {
  const basic = basicCredentials(x.req.headers.authorization);
  const post = form.get('client_secret');
  const assertion = form.get('client_assertion');
  const assertionType = form.get('client_assertion_type');
  const formId = form.get('client_id');
  const used = [basic, post, assertion ?? assertionType].filter((v) => v !== undefined).length;
  if (used > 1) throw new InvalidRequestError('use exactly one client authentication method');
  if (basic) {
    if (formId !== undefined && formId !== basic.clientId)
      throw new InvalidClientError('client_id differs from the Basic credentials');
    return { kind: 'secret', clientId: basic.clientId, secret: basic.secret, raw: basic.raw, via: 'basic' };
  }
  if (assertion !== undefined || assertionType !== undefined) {
    if (assertionType !== ASSERTION_TYPE)
      throw new InvalidClientError(`client_assertion_type must be ${ASSERTION_TYPE}`);
    if (!assertion || assertion.length > 8192) throw new InvalidClientError('client_assertion is missing');
    let sub: unknown;
    try {
      sub = decodeJwt(assertion).sub;
    } catch {
      throw new InvalidClientError('client_assertion is not a JWT');
    }
    if (typeof sub !== 'string' || sub === '') throw new InvalidClientError('client_assertion has no sub');
    if (formId !== undefined && formId !== sub)
      throw new InvalidClientError('client_id differs from the client_assertion sub');
    return { kind: 'assertion', clientId: sub, assertion };
  }
  if (!formId) return undefined;
  if (post !== undefined) return { kind: 'secret', clientId: formId, secret: post, via: 'post' };
  return { kind: 'none', clientId: formId };
}

/**
 * The client a token, revocation or device request comes from, authenticated as it registered: none (a
 * public client: client_id only, no secret), client_secret_post or client_secret_basic (either carries the
 * secret; clients such as Claude send it in the body whatever they registered), or private_key_jwt (RFC 7523).
 * Every failure is 401 `invalid_client` (a client that gets it registers again). Undefined when the request
 * names no client at all (the caller decides: the token endpoint refuses it, revocation accepts it).
 */
export async function authenticateClient(
  ctx: IdpContext,
  x: Exchange,
  form: ReadonlyMap<string, string>,
): Promise<Client | undefined> {
  const p = presented(x, form);
  if (!p) return undefined;
  // A metadata-document client's keys are in its document: read it (cached, or a counted fetch).
  const client = await ctx.clients.find(
    p.clientId,
    p.kind === 'assertion' ? countedFetches(ctx.rateLimiter, x.req) : undefined,
  );
  if (!client) throw new InvalidClientError('client_id is not a registered client');
  const method = client.authMethod ?? 'none';
  if (method === 'none') {
    if (p.kind !== 'none')
      throw new InvalidClientError('the client is public: no client_secret or client_assertion is accepted');
    return client;
  }
  if (SECRET_METHODS.has(method)) {
    if (p.kind !== 'secret')
      throw new InvalidClientError('the client must authenticate with its client_secret');
    const matches = (v: string | undefined) =>
      v !== undefined && client.secretHash !== undefined && secretMatches(client.secretHash, v);
    if (!matches(p.secret) && !matches(p.raw)) throw new InvalidClientError('client authentication failed');
    return client;
  }
  if (p.kind !== 'assertion')
    throw new InvalidClientError('the client must authenticate with a client_assertion (private_key_jwt)');
  await verifyAssertion(ctx, x, client, p.assertion);
  return client;
}

async function verifyAssertion(
  ctx: IdpContext,
  x: Exchange,
  client: Client,
  assertion: string,
): Promise<void> {
  const keys = await ctx.clientKeys.keysFor(
    { jwks: client.jwks, jwksUri: client.jwksUri },
    countedFetches(ctx.rateLimiter, x.req),
  );
  const issuer = ctx.config.issuer;
  let payload: { jti?: unknown; exp?: number };
  try {
    ({ payload } = await jwtVerify(assertion, keys, {
      issuer: client.clientId,
      subject: client.clientId,
      audience: [issuer, `${issuer}/oauth/token`, `${issuer}${x.url.pathname}`],
      algorithms: ASSERTION_ALGS,
      requiredClaims: ['exp', 'jti'],
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
    }));
  } catch (err) {
    const why = err instanceof joseErrors.JOSEError ? err.message : 'the assertion could not be verified';
    throw new InvalidClientError(`client_assertion is invalid: ${why}`);
  }
  const now = Math.floor(Date.now() / 1000);
  if (typeof payload.jti !== 'string' || payload.jti === '' || payload.jti.length > 256)
    throw new InvalidClientError('client_assertion jti must be a non-empty string');
  if (payload.exp! - now > MAX_ASSERTION_SECONDS)
    throw new InvalidClientError(`client_assertion must expire within ${MAX_ASSERTION_SECONDS} s`);
  if (!(await useJti(ctx.pool, client.clientId, payload.jti, payload.exp!)))
    throw new InvalidClientError('client_assertion was already used (jti)');
}

/** Records a jti as used; false when it already was (on any replica). */
async function useJti(pool: Pool, clientId: string, jti: string, exp: number): Promise<boolean> {
  const r = await pool.query({
    name: 'client_assertion_jti',
    text: `INSERT INTO platform.client_assertion_jtis (client_id, jti, expires_at)
           VALUES ($1, $2, to_timestamp($3)) ON CONFLICT DO NOTHING`,
    values: [clientId, jti, exp + CLOCK_TOLERANCE_SECONDS],
  });
  return r.rowCount === 1;
}
