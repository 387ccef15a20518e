import { createHash } from 'node:crypto';
import type { JWK } from 'jose';
import { type EmbeddedKey, embeddedKey, heldEmbeddedKey } from './embedded-key.ts';

export { jwkThumbprint } from './embedded-key.ts';

/** Every algorithm a proof may be signed with (asymmetric only, RFC 9449 §4.2); servers list a subset. */
export const DPOP_ALGORITHMS = ['ES256', 'ES384', 'EdDSA', 'Ed25519', 'PS256', 'RS256'] as const;
/**
 * How old a proof may be (RFC 9449 §4.3 check 11 leaves the window to the server). The window is 60 s each way of
 * the server's clock (docs/security.md § DPoP): wide enough for a client whose clock runs a minute off, narrow
 * enough that a proof made ahead of time, or a jti kept for replay detection, lives two minutes, not ten (the
 * ±5 min some DPoP servers accept).
 */
export const DPOP_MAX_AGE_SECONDS = 60;
/** How far in the future a proof's iat may be: clock skew between the client and the server. */
export const DPOP_FUTURE_LEEWAY_SECONDS = 60;
/** How far the clocks of two replicas sharing the jti store may differ (NTP keeps them far closer). */
const REPLICA_CLOCK_SKEW_SECONDS = 2;
/**
 * How long a proof's jti must be remembered by whoever accepted it (the replay store's TTL, IdP and gateway
 * alike). A proof is accepted while the server's whole-second clock is within [iat − ahead, iat + max age]; the
 * first use can be as early as iat − ahead, and the last acceptance ends one second after iat + max age, so its
 * jti must outlive the first use by max age + ahead + 1 s — plus the skew between the replicas' clocks, since
 * another replica judges the proof's age by its own.
 */
export const DPOP_JTI_RETENTION_SECONDS =
  DPOP_MAX_AGE_SECONDS + DPOP_FUTURE_LEEWAY_SECONDS + 1 + REPLICA_CLOCK_SKEW_SECONDS;

/**
 * Why a proof was refused. `reason` is what the server answers as the OAuth error (`invalid_dpop_proof`, or
 * `use_dpop_nonce` when the proof lacks the server's current nonce); `message` says which check failed.
 */
export class DpopProofError extends Error {
  readonly reason: 'invalid_dpop_proof' | 'use_dpop_nonce';
  constructor(reason: 'invalid_dpop_proof' | 'use_dpop_nonce', message: string) {
    super(message);
    this.name = 'DpopProofError';
    this.reason = reason;
  }
}

export interface VerifiedDpopProof {
  /** RFC 7638 SHA-256 thumbprint of the proof's key, base64url: what `cnf.jkt` holds. */
  jkt: string;
  jti: string;
  iat: number;
  jwk: JWK;
}

export interface DpopVerifyOptions {
  /** The request's method. */
  method: string;
  /** The request's URL as the server sees it (query and fragment are ignored). */
  url: string;
  /** When the proof accompanies an access token: `ath` is then required and must be its hash. */
  accessToken?: string;
  /** When the server requires a nonce: the proof's `nonce` must equal it (`use_dpop_nonce` otherwise). */
  nonce?: string;
  /** When the server requires a nonce it checks itself (e.g. DpopNonces.nonceValid): as `nonce`, by a function. */
  nonceValid?: (nonce: string) => boolean;
  /** Seconds since the epoch (tests). */
  now?: number;
  algorithms: readonly string[];
}

/** `ath`: base64url(SHA-256(access token)) (RFC 9449 §4.2). */
export const accessTokenHash = (token: string) => createHash('sha256').update(token).digest('base64url');

/**
 * The URL form htu is compared in (RFC 9449 §4.3 check 9, RFC 3986 §6.2.2–6.2.3): scheme and host lowercased,
 * default port dropped, empty path as `/`, no query, no fragment. undefined when it is not an absolute http(s) URL.
 */
export function normaliseHtu(value: string): string | undefined {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return undefined;
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return undefined;
  // URL already lowercases the scheme and host and drops the default port; the path's case is kept.
  return `${u.protocol}//${u.host}${u.pathname || '/'}`;
}

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;
const bad = (message: string) => new DpopProofError('invalid_dpop_proof', message);
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** The protected header of a proof whose key is not held yet, checked as RFC 9449 §4.3 checks 2–5 say. */
function keyFromHeader(segment: string, algorithms: readonly string[]): EmbeddedKey {
  let header: unknown;
  try {
    if (!BASE64URL.test(segment)) throw new TypeError('not base64url');
    header = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
  } catch {
    throw bad('the DPoP proof is not a JWT');
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header))
    throw bad('the DPoP proof is not a JWT');
  const { typ, alg, jwk } = header as { typ?: unknown; alg?: unknown; jwk?: unknown };
  if (typ !== 'dpop+jwt') throw bad('the DPoP proof typ must be dpop+jwt');
  if (typeof alg !== 'string' || !algorithms.includes(alg)) throw bad('the DPoP proof alg is not supported');
  if (!jwk || typeof jwk !== 'object' || Array.isArray(jwk)) throw bad('the DPoP proof has no jwk header');
  if (PRIVATE_MEMBERS.some((m) => m in jwk)) throw bad('the DPoP proof jwk must be a public key');
  try {
    return embeddedKey(segment, alg, jwk as Record<string, unknown>);
  } catch {
    throw bad('the DPoP proof signature or jwk is not valid');
  }
}

/**
 * RFC 9449 §4.3: checks one `DPoP` header value. Throws DpopProofError; replay (jti) is the caller's store.
 * Synchronous: the signature is verified with node:crypto by the proof key's fast-jwt verifier, made once per
 * protected header (lib/dpop/embedded-key.ts), and the header is decoded only when its key is not held.
 */
export function verifyDpopProof(proof: string, o: DpopVerifyOptions): VerifiedDpopProof {
  if (typeof proof !== 'string' || !proof || proof.includes(','))
    throw bad('exactly one DPoP proof is required');
  const dot = proof.indexOf('.');
  if (dot <= 0) throw bad('the DPoP proof is not a JWT');
  const segment = proof.slice(0, dot);
  let key = heldEmbeddedKey(segment);
  if (key === undefined) key = keyFromHeader(segment, o.algorithms);
  // Held keys passed the header's checks when first seen; the alg list is the caller's, checked every time.
  else if (!o.algorithms.includes(key.alg)) throw bad('the DPoP proof alg is not supported');
  let payload: Record<string, unknown>;
  try {
    payload = key.verify(proof);
  } catch {
    throw bad('the DPoP proof signature or jwk is not valid');
  }
  const { jti, htm, htu, iat } = payload as { jti?: unknown; htm?: unknown; htu?: unknown; iat?: unknown };
  if (typeof jti !== 'string' || !jti || jti.length > 256) throw bad('the DPoP proof jti is missing');
  if (htm !== o.method) throw bad('the DPoP proof htm does not match the request method');
  const want = normaliseHtu(o.url);
  if (typeof htu !== 'string' || !want || normaliseHtu(htu) !== want) {
    throw bad('the DPoP proof htu does not match the request URL');
  }
  if (typeof iat !== 'number' || !Number.isFinite(iat)) throw bad('the DPoP proof iat is missing');
  const now = o.now ?? Math.floor(Date.now() / 1000);
  if (iat > now + DPOP_FUTURE_LEEWAY_SECONDS) throw bad('the DPoP proof iat is in the future');
  if (iat < now - DPOP_MAX_AGE_SECONDS) throw bad('the DPoP proof is too old');
  if (o.accessToken !== undefined) {
    if (typeof payload.ath !== 'string' || payload.ath !== accessTokenHash(o.accessToken)) {
      throw bad('the DPoP proof ath does not match the access token');
    }
  }
  if (o.nonce !== undefined || o.nonceValid) {
    const nonce = payload.nonce;
    const ok =
      typeof nonce === 'string' &&
      (o.nonce === undefined || nonce === o.nonce) &&
      (o.nonceValid?.(nonce) ?? true);
    if (!ok) {
      throw new DpopProofError('use_dpop_nonce', 'the authorization server requires a fresh DPoP nonce');
    }
  }
  // The thumbprint of the key the signature was just verified with (computed with it: lib/dpop/embedded-key.ts).
  return { jkt: key.jkt, jti, iat, jwk: key.jwk as JWK };
}
