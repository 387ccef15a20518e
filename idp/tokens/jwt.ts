import { randomUUID, sign, verify } from 'node:crypto';
import type { SigningKey } from './keys.ts';

// Signing is the hot path of every grant, so it uses node:crypto's RSA directly (about 3x cheaper per
// signature than WebCrypto, which jose uses). The compact serialisation (RFC 7515 §7.1) is three base64url
// parts; the header is encoded once per key. Every token is verified by jose in the tests.

export interface AccessTokenClaims {
  iss: string;
  sub: string;
  email: string;
  aud: string;
  scope: string;
  azp: string;
  client_id: string;
  jti: string;
  iat: number;
  exp: number;
  /** DPoP-bound (RFC 9449 §6.1): the thumbprint of the key a proof must be signed with. */
  cnf?: { jkt: string };
  /** Entity grants (idp/entity-grants): entity → permissions; absent when the user holds none. */
  ent?: Record<string, string[]>;
  /** More entities than PLATFORM_ENT_MAX: no `ent`, and services that enforce entity grants refuse them all. */
  ent_overflow?: true;
  /** RFC 8693 §4.1: the machine client acting for the user (a token exchange), an earlier actor nested inside. */
  act?: Actor;
}

/** An `act` claim: who acts; `act` inside it, who acted before (RFC 8693 §4.1). */
export interface Actor {
  sub: string;
  act?: Actor;
}

export interface IdTokenClaims {
  iss: string;
  sub: string;
  aud: string;
  azp: string;
  iat: number;
  exp: number;
  auth_time: number;
  nonce?: string;
  email?: string;
  email_verified?: boolean;
}

export class JwtSigner {
  readonly #key: SigningKey;
  readonly #atHeader: string;
  readonly #idHeader: string;

  constructor(key: SigningKey) {
    this.#key = key;
    this.#atHeader = b64json({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' });
    this.#idHeader = b64json({ alg: 'RS256', kid: key.kid, typ: 'JWT' });
  }

  get kid(): string {
    return this.#key.kid;
  }

  accessToken(claims: AccessTokenClaims): string {
    return this.#sign(this.#atHeader, claims);
  }

  idToken(claims: IdTokenClaims): string {
    return this.#sign(this.#idHeader, claims);
  }

  #sign(header: string, claims: object): string {
    const input = `${header}.${b64json(claims)}`;
    const sig = sign('sha256', Buffer.from(input), this.#key.privateKey);
    return `${input}.${sig.toString('base64url')}`;
  }
}

function b64json(v: unknown): string {
  return Buffer.from(JSON.stringify(v)).toString('base64url');
}

export function newJti(): string {
  return randomUUID();
}

export interface VerifiedAccessToken {
  claims: AccessTokenClaims;
}

/**
 * Verifies a token this provider issued (userinfo, revocation): RS256 under one of our kids, our issuer, our
 * audience, unexpired (60 s leeway). Returns undefined for anything else; the caller decides the error.
 */
export function verifyOwnAccessToken(
  token: string,
  keys: readonly SigningKey[],
  expect: { issuer: string; audience: string; leeway?: number; allowExpired?: boolean },
  now = Math.floor(Date.now() / 1000),
): AccessTokenClaims | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  let header: { alg?: unknown; kid?: unknown };
  let claims: Partial<AccessTokenClaims>;
  try {
    header = JSON.parse(Buffer.from(parts[0]!, 'base64url').toString('utf8'));
    claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (header.alg !== 'RS256' || typeof header.kid !== 'string') return undefined;
  const key = keys.find((k) => k.kid === header.kid);
  if (!key) return undefined;
  const ok = verify(
    'sha256',
    Buffer.from(`${parts[0]}.${parts[1]}`),
    key.publicKey,
    Buffer.from(parts[2]!, 'base64url'),
  );
  if (!ok || claims === null || typeof claims !== 'object') return undefined;
  const leeway = expect.leeway ?? 60;
  if (claims.iss !== expect.issuer || claims.aud !== expect.audience) return undefined;
  if (typeof claims.exp !== 'number' || typeof claims.sub !== 'string' || typeof claims.jti !== 'string')
    return undefined;
  if (!expect.allowExpired && claims.exp + leeway < now) return undefined;
  return claims as AccessTokenClaims;
}
