import { createHmac, type KeyObject, timingSafeEqual, verify } from 'node:crypto';
import { InvalidTokenError } from '../errors.ts';

// The compact JWS (RFC 7515 §7.1) is split and checked by hand rather than through jose: jose verifies RS256
// with WebCrypto (~60–80 µs a signature here) where node:crypto's verify costs ~25 µs, and a cache miss is on
// the request path. What jose would enforce for us is enforced here, per RFC 8725 (JWT BCP):
// - the algorithm is fixed by the issuer's trust path, never read from the token (no `none`, no HS/RS confusion);
// - `jku`, `x5u`, `jwk`, `x5c` are never used to find a key (keys come only from the configured key set);
// - `crit` is rejected: this verifier understands no extension, so any critical one must fail (RFC 7515 §4.1.11).

export type JsonObject = Record<string, unknown>;

export interface DecodedJws {
  header: JsonObject;
  payload: JsonObject;
  /** `base64url(header).base64url(payload)`, the bytes the signature covers. */
  signingInput: string;
  signature: Buffer;
}

// Three base64url segments; a JWE (five) or anything with padding, spaces or other bytes is not a JWS.
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

function parseSegment(segment: string, what: string): JsonObject {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidTokenError('malformed_token', `token ${what} is not base64url-encoded JSON`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new InvalidTokenError('malformed_token', `token ${what} is not a JSON object`);
  }
  return v as JsonObject;
}

/** Splits and decodes a compact JWS without trusting anything in it yet. */
export function decodeJws(token: string): DecodedJws {
  if (!COMPACT_JWS.test(token)) {
    throw new InvalidTokenError('malformed_token', 'token is not a compact JWS (three base64url segments)');
  }
  const a = token.indexOf('.');
  const b = token.indexOf('.', a + 1);
  const header = parseSegment(token.slice(0, a), 'header');
  const payload = parseSegment(token.slice(a + 1, b), 'payload');
  return {
    header,
    payload,
    signingInput: token.slice(0, b),
    signature: Buffer.from(token.slice(b + 1), 'base64url'),
  };
}

/** Header checks common to every trust path; `alg` must be exactly the one the path allows. */
export function checkHeader(header: JsonObject, alg: 'RS256' | 'HS256'): void {
  if (header.alg !== alg) {
    const given = typeof header.alg === 'string' ? header.alg.slice(0, 32) : typeof header.alg;
    throw new InvalidTokenError(
      'unsupported_alg',
      `token alg "${given}" is not accepted for this issuer (only ${alg})`,
    );
  }
  if (header.crit !== undefined) {
    throw new InvalidTokenError(
      'unsupported_crit',
      'token header has critical extensions ("crit") this gateway does not understand',
    );
  }
}

export function verifyRs256(jws: DecodedJws, key: KeyObject): boolean {
  return verify('sha256', Buffer.from(jws.signingInput), key, jws.signature);
}

export function verifyHs256(jws: DecodedJws, secret: Buffer): boolean {
  const expected = createHmac('sha256', secret).update(jws.signingInput).digest();
  return jws.signature.length === expected.length && timingSafeEqual(expected, jws.signature);
}
