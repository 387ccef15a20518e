import { createHash, createHmac, createSecretKey, hash, type KeyObject, timingSafeEqual } from 'node:crypto';

// The gateway vouches for the caller to a tool server with these headers (docs/security.md, docs/gateway.md).
// Signature v2: `x-platform-identity: t=<unix s>,v2=<hex HMAC-SHA256>` over the newline-joined lines
//   v2, t, service, METHOD, path-with-query, hex SHA-256 of the body, email, sub, issuer, scope, client id, jti,
//   request id
// keyed by the service's own identity key (deriveIdentityKey). A header set is therefore worth nothing for
// another service, method, path or body, and a tool server holds only its own key, never the gateway's secret.
// Signature v3 (what the gateway sends): `t=<unix s>,v3=<hex>` over the same lines, the first reading `v3`, plus
// one last line: the hex SHA-256 of `x-platform-entitlements` (base64url of the token's `ent` JSON; the empty
// string when absent). Signature v4 (sent when the request carries an upstream token or an actor): v3's lines,
// the first reading `v4`, plus two last lines: the hex SHA-256 of `x-platform-upstream-token` (the user's token
// for the system behind the tool; of the empty string when absent) and the value of `x-platform-actor` (the
// client acting for the user in a delegated token; an empty line when absent). Verifiers accept v2, v3 and v4;
// a header a version does not sign is ignored under it (never trusted unsigned).
export const IDENTITY_HEADERS = {
  email: 'x-platform-user-email',
  sub: 'x-platform-user-sub',
  issuer: 'x-platform-issuer',
  scope: 'x-platform-scope',
  clientId: 'x-platform-client-id',
  jti: 'x-platform-jti',
  requestId: 'x-request-id',
  entitlements: 'x-platform-entitlements',
  upstreamToken: 'x-platform-upstream-token',
  actor: 'x-platform-actor',
  signature: 'x-platform-identity',
} as const;

export type IssuerKind = 'platform' | 'entra' | 'service';

export interface Identity {
  email: string;
  sub: string;
  issuer: IssuerKind;
  scope: string;
  clientId: string;
  jti: string;
  requestId: string;
  /**
   * `x-platform-entitlements` as signed under v3 ('' when the token carries no `ent`); undefined under v2 (the
   * header, if any, was not signed). Signing with it set signs v3.
   */
  entitlements?: string;
  /**
   * `x-platform-upstream-token` as signed under v4: the user's access token for the service's upstream
   * connection ('' when none). Undefined under v2 and v3. A secret: never logged.
   */
  upstreamToken?: string;
  /**
   * `x-platform-actor` as signed under v4: the client acting for the user (the token's outermost `act.sub`; ''
   * when none). Undefined under v2 and v3. Signing with either of these two non-empty signs v4.
   */
  actor?: string;
  /**
   * The hex SHA-256 of `upstreamToken` (its v4 line), when the signer already holds it: the gateway hashes each
   * cached upstream token once (identityValueSha256), not on every request. Must be that token's hash (a wrong
   * one only makes the signature fail); signing only, never read from a request.
   */
  upstreamTokenSha256?: string;
}

/** The request a signature is bound to, exactly as the tool server receives it. */
export interface SignedRequest {
  service: string;
  /** Upper case, as on the request line. */
  method: string;
  /** The request target: path and query, as sent to the tool server. */
  path: string;
  /** Hex SHA-256 of the raw body (bodySha256). */
  bodySha256: string;
}

export const IDENTITY_MAX_AGE_SECONDS = 60;
/** `GATEWAY_IDENTITY_SECRET`: every service key is derived from it, so it must resist offline guessing. */
export const MIN_IDENTITY_SECRET_LENGTH = 32;
const KEY_CONTEXT = 'platform-identity-v2:';
/** A service key is 32 bytes written as 64 lower-case hex characters, used as is (its UTF-8 bytes). */
export const IDENTITY_KEY_PATTERN = /^[0-9a-f]{64}$/;

/** The service's identity key: hex(HMAC-SHA256(secret, "platform-identity-v2:" + service)). */
export function deriveIdentityKey(secret: string, service: string): string {
  if (secret.length < MIN_IDENTITY_SECRET_LENGTH) {
    throw new TypeError(`the identity secret must be at least ${MIN_IDENTITY_SECRET_LENGTH} characters`);
  }
  return createHmac('sha256', secret)
    .update(KEY_CONTEXT + service)
    .digest('hex');
}

export const EMPTY_BODY_SHA256 = createHash('sha256').digest('hex');

/** Hex SHA-256 of a raw request body (an empty body hashes the empty string). */
export function bodySha256(body: Uint8Array | null | undefined): string {
  if (!body || body.length === 0) return EMPTY_BODY_SHA256;
  // The one-shot form: no Hash object per request (the gateway and every tool server hash each body).
  return hash('sha256', body, 'hex');
}

/**
 * The HMAC key as a KeyObject, made once per identity key (exported for the tests) (a service's key is the same string on every request):
 * createHmac with a raw string key imports it again on every call. Keyed by the string, bounded (keys are per
 * service; a process holds a handful).
 */
const hmacKeys = new Map<string, KeyObject>();
const HMAC_KEYS_HELD = 64;

export function hmacKey(key: string): KeyObject {
  let k = hmacKeys.get(key);
  if (k === undefined) {
    if (hmacKeys.size >= HMAC_KEYS_HELD) hmacKeys.clear();
    // createHmac(…, string) uses the string's UTF-8 bytes: the same key.
    k = createSecretKey(Buffer.from(key, 'utf8'));
    hmacKeys.set(key, k);
  }
  return k;
}

/** The hash line of an absent header (most requests carry no `ent` and no upstream token): hashed once. */
const EMPTY_SHA256 = hash('sha256', '', 'hex');

const sha256Line = (v: string | undefined) =>
  v === undefined || v === '' ? EMPTY_SHA256 : hash('sha256', v, 'hex');

/** The line v3/v4 sign for a hashed header value (`x-platform-entitlements`, `x-platform-upstream-token`). */
export const identityValueSha256 = sha256Line;

type Version = 'v2' | 'v3' | 'v4';

/** What the gateway signs for this identity: v4 with an upstream token or an actor, v3 with entitlements. */
function versionOf(id: Identity): Version {
  if (id.upstreamToken || id.actor) return 'v4';
  return id.entitlements !== undefined ? 'v3' : 'v2';
}

function mac(key: string, t: number, r: SignedRequest, id: Identity, v: Version): string {
  let lines = `${v}\n${t}\n${r.service}\n${r.method}\n${r.path}\n${r.bodySha256}\n${id.email}\n${id.sub}\n${id.issuer}\n${id.scope}\n${id.clientId}\n${id.jti}\n${id.requestId}`;
  if (v !== 'v2') lines += `\n${sha256Line(id.entitlements)}`;
  if (v === 'v4') {
    const tokenLine = id.upstreamToken
      ? (id.upstreamTokenSha256 ?? sha256Line(id.upstreamToken))
      : EMPTY_SHA256;
    lines += `\n${tokenLine}\n${id.actor ?? ''}`;
  }
  return createHmac('sha256', hmacKey(key)).update(lines).digest('hex');
}

/** base64url of the `ent` claim's JSON, as the gateway forwards it; '' when the token carries none. */
export function encodeEntitlements(ent: unknown): string {
  if (ent === null || typeof ent !== 'object' || Array.isArray(ent)) return '';
  return Buffer.from(JSON.stringify(ent)).toString('base64url');
}

/** The forwarded claim back (a tool server's view): undefined when absent, unsigned or not an object. */
export function decodeEntitlements(id: Identity): Record<string, unknown> | undefined {
  if (!id.entitlements) return undefined;
  try {
    const v: unknown = JSON.parse(Buffer.from(id.entitlements, 'base64url').toString('utf8'));
    return v !== null && typeof v === 'object' && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The headers the gateway adds, keyed by the service's identity key; values are exactly the signed strings. */
export function signIdentity(
  key: string,
  request: SignedRequest,
  id: Identity,
  now = Math.floor(Date.now() / 1000),
): Record<string, string> {
  const flat = pushIdentityHeaders([], key, request, id, now);
  const out: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) out[flat[i]!] = flat[i + 1]!;
  return out;
}

/**
 * signIdentity's headers appended to a flat `[name, value, …]` list (the gateway's forwarded headers): the
 * request path builds no object for them. Returns `headers`.
 */
export function pushIdentityHeaders(
  headers: string[],
  key: string,
  request: SignedRequest,
  id: Identity,
  now = Math.floor(Date.now() / 1000),
): string[] {
  const v = versionOf(id);
  headers.push(
    IDENTITY_HEADERS.email,
    id.email,
    IDENTITY_HEADERS.sub,
    id.sub,
    IDENTITY_HEADERS.issuer,
    id.issuer,
    IDENTITY_HEADERS.scope,
    id.scope,
    IDENTITY_HEADERS.clientId,
    id.clientId,
    IDENTITY_HEADERS.jti,
    id.jti,
    IDENTITY_HEADERS.requestId,
    id.requestId,
  );
  if (id.entitlements) headers.push(IDENTITY_HEADERS.entitlements, id.entitlements);
  if (id.upstreamToken) headers.push(IDENTITY_HEADERS.upstreamToken, id.upstreamToken);
  if (id.actor) headers.push(IDENTITY_HEADERS.actor, id.actor);
  headers.push(IDENTITY_HEADERS.signature, `t=${now},${v}=${mac(key, now, request, id, v)}`);
  return headers;
}

export class IdentityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'IdentityError';
  }
}

type HeaderBag = Readonly<Record<string, string | string[] | undefined>>;

function one(headers: HeaderBag, name: string): string {
  const v = headers[name];
  if (Array.isArray(v)) throw new IdentityError(`identity header ${name} repeated`);
  return v ?? '';
}

/**
 * Checks the gateway's signature for this request with this service's key: missing, malformed, made for another
 * service, method, path or body, or more than 60 s from now → IdentityError.
 */
export function verifyIdentity(
  key: string,
  request: SignedRequest,
  headers: HeaderBag,
  now = Math.floor(Date.now() / 1000),
): Identity {
  const sig = one(headers, IDENTITY_HEADERS.signature);
  if (!sig) throw new IdentityError('identity signature missing');
  const m = /^t=(\d{1,12}),(v2|v3|v4)=([0-9a-f]{64})$/.exec(sig);
  if (!m)
    throw new IdentityError(
      'identity signature malformed (expected t=<unix seconds>,v4=<hex>, v3=<hex> or v2=<hex>)',
    );
  const t = Number(m[1]);
  if (Math.abs(now - t) > IDENTITY_MAX_AGE_SECONDS) throw new IdentityError('identity signature expired');
  const issuer = one(headers, IDENTITY_HEADERS.issuer);
  const id: Identity = {
    email: one(headers, IDENTITY_HEADERS.email),
    sub: one(headers, IDENTITY_HEADERS.sub),
    issuer: issuer as IssuerKind,
    scope: one(headers, IDENTITY_HEADERS.scope),
    clientId: one(headers, IDENTITY_HEADERS.clientId),
    jti: one(headers, IDENTITY_HEADERS.jti),
    requestId: one(headers, IDENTITY_HEADERS.requestId),
  };
  const v = m[2] as Version;
  if (v !== 'v2') id.entitlements = one(headers, IDENTITY_HEADERS.entitlements);
  if (v === 'v4') {
    id.upstreamToken = one(headers, IDENTITY_HEADERS.upstreamToken);
    id.actor = one(headers, IDENTITY_HEADERS.actor);
  }
  const expected = Buffer.from(mac(key, t, request, id, v), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(m[3]!, 'hex')))
    throw new IdentityError(
      'identity signature invalid for this service, method, path, body, entitlements, upstream token and actor',
    );
  if (issuer !== 'platform' && issuer !== 'entra' && issuer !== 'service') {
    throw new IdentityError('identity issuer kind unknown');
  }
  if (!id.email || !id.sub) throw new IdentityError('identity incomplete');
  return id;
}
