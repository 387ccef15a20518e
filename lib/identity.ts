import { createHmac, timingSafeEqual } from 'node:crypto';

// docs/reference.md § Headers: the gateway vouches for the caller to the tool servers with these.
export const IDENTITY_HEADERS = {
  email: 'x-platform-user-email',
  sub: 'x-platform-user-sub',
  issuer: 'x-platform-issuer',
  scope: 'x-platform-scope',
  clientId: 'x-platform-client-id',
  jti: 'x-platform-jti',
  requestId: 'x-request-id',
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
}

export const IDENTITY_MAX_AGE_SECONDS = 60;

function mac(secret: string | Buffer, t: number, id: Identity): string {
  return createHmac('sha256', secret)
    .update(
      `${t}\n${id.email}\n${id.sub}\n${id.issuer}\n${id.scope}\n${id.clientId}\n${id.jti}\n${id.requestId}`,
    )
    .digest('hex');
}

/** The headers the gateway adds; values are exactly the signed strings. */
export function signIdentity(
  secret: string | Buffer,
  id: Identity,
  now = Math.floor(Date.now() / 1000),
): Record<string, string> {
  return {
    [IDENTITY_HEADERS.email]: id.email,
    [IDENTITY_HEADERS.sub]: id.sub,
    [IDENTITY_HEADERS.issuer]: id.issuer,
    [IDENTITY_HEADERS.scope]: id.scope,
    [IDENTITY_HEADERS.clientId]: id.clientId,
    [IDENTITY_HEADERS.jti]: id.jti,
    [IDENTITY_HEADERS.requestId]: id.requestId,
    [IDENTITY_HEADERS.signature]: `t=${now},v1=${mac(secret, now, id)}`,
  };
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

/** Verifies the gateway's signature (missing, wrong or older than 60 s → IdentityError). */
export function verifyIdentity(
  secret: string | Buffer,
  headers: HeaderBag,
  now = Math.floor(Date.now() / 1000),
): Identity {
  const sig = one(headers, IDENTITY_HEADERS.signature);
  if (!sig) throw new IdentityError('identity signature missing');
  const m = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(sig);
  if (!m) throw new IdentityError('identity signature malformed');
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
  const expected = Buffer.from(mac(secret, t, id), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(m[2]!, 'hex')))
    throw new IdentityError('identity signature invalid');
  if (issuer !== 'platform' && issuer !== 'entra' && issuer !== 'service') {
    throw new IdentityError('identity issuer kind unknown');
  }
  if (!id.email || !id.sub) throw new IdentityError('identity incomplete');
  return id;
}
