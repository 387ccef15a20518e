import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { createVerifier } from 'fast-jwt';
import type { JWK } from 'jose';

// A DPoP client signs every proof with the same key, and each proof carries that key in its `jwk` header. Importing
// it, building its verifier and computing the RFC 7638 thumbprint the token is bound to depend only on the proof's
// protected header, so they are done once per header and kept: a proof whose header was seen before goes straight
// to its key's verifier. Its signature and claims are still verified, every time (docs/gateway.md § What DPoP
// costs).
//
// The verifier is fast-jwt's (docs/security.md § How a proof is verified): synchronous, over node:crypto, with the
// public key made into a KeyObject once, when the verifier is created. jose v6 verifies through WebCrypto only:
// asynchronous, and a third to two thirds of a signature's CPU more per proof (docs/gateway.md § What DPoP costs).

/** A member of a JWK read as what RFC 7638 hashes: a string, or nothing. */
const member = (jwk: Record<string, unknown>, name: string): string => {
  const v = jwk[name];
  if (typeof v !== 'string' || v === '') throw new TypeError(`the JWK "${name}" member is missing`);
  return v;
};

/**
 * RFC 7638 SHA-256 thumbprint of a public JWK, base64url: what `cnf.jkt` holds. The hash input is the JSON object of
 * the key type's required members only (§3.2: EC crv kty x y; RSA e kty n; RFC 8037 §2, OKP crv kty x; oct k kty),
 * in lexicographic order, without whitespace (§3.3). Synchronous: node:crypto's SHA-256.
 */
export function jwkThumbprint(jwk: JWK | Record<string, unknown>): string {
  const k = jwk as Record<string, unknown>;
  let canonical: Record<string, string>;
  switch (k.kty) {
    case 'EC':
      canonical = { crv: member(k, 'crv'), kty: 'EC', x: member(k, 'x'), y: member(k, 'y') };
      break;
    case 'OKP':
      canonical = { crv: member(k, 'crv'), kty: 'OKP', x: member(k, 'x') };
      break;
    case 'RSA':
      canonical = { e: member(k, 'e'), kty: 'RSA', n: member(k, 'n') };
      break;
    case 'oct':
      canonical = { k: member(k, 'k'), kty: 'oct' };
      break;
    default:
      throw new TypeError('the JWK "kty" is not one RFC 7638 defines a thumbprint for');
  }
  // Members inserted in lexicographic order above; JSON.stringify keeps insertion order and adds no whitespace.
  return createHash('sha256').update(JSON.stringify(canonical)).digest('base64url');
}

/**
 * What each proof algorithm needs its key to be (RFC 7518 §3.1, RFC 8037 §3.1, RFC 9864 §2.2). For EC and OKP keys,
 * `spki` is the DER SubjectPublicKeyInfo up to the key bytes (RFC 5480 §2 with the curve's OID, RFC 8410 §4): the
 * coordinates of a full-length jwk follow it as they are (EC: 0x04 ‖ x ‖ y).
 */
const KEY_RULES: Record<string, { kty: 'EC' | 'OKP' | 'RSA'; crv?: string; bytes?: number; spki?: Buffer }> =
  {
    ES256: {
      kty: 'EC',
      crv: 'P-256',
      bytes: 32,
      spki: Buffer.from('3059301306072a8648ce3d020106082a8648ce3d03010703420004', 'hex'),
    },
    ES384: {
      kty: 'EC',
      crv: 'P-384',
      bytes: 48,
      spki: Buffer.from('3076301006072a8648ce3d020106052b8104002203620004', 'hex'),
    },
    EdDSA: { kty: 'OKP', crv: 'Ed25519', bytes: 32, spki: Buffer.from('302a300506032b6570032100', 'hex') },
    Ed25519: { kty: 'OKP', crv: 'Ed25519', bytes: 32, spki: Buffer.from('302a300506032b6570032100', 'hex') },
    PS256: { kty: 'RSA' },
    RS256: { kty: 'RSA' },
  };
/** RFC 7518 §3.3, §3.5: an RSA key for RS256/PS256 is 2048 bits or larger (jose refuses smaller ones, so do we). */
const MIN_RSA_BITS = 2048;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** A coordinate or key value: base64url, exactly `bytes` long when the key type fixes it (RFC 7518 §6.2.1.2). */
function octets(jwk: Record<string, unknown>, name: string, bytes?: number): Buffer {
  const v = member(jwk, name);
  if (!BASE64URL.test(v)) throw new TypeError(`the JWK "${name}" is not base64url`);
  const b = Buffer.from(v, 'base64url');
  if (bytes !== undefined && b.length !== bytes)
    throw new TypeError(`the JWK "${name}" is not ${bytes} bytes long`);
  return b;
}

const pem = (der: Buffer) =>
  `-----BEGIN PUBLIC KEY-----\n${der
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END PUBLIC KEY-----\n`;

/**
 * The public key a proof's `jwk` header names, for `alg`, as the SPKI PEM fast-jwt takes, with the checks jose's
 * EmbeddedJWK and WebCrypto import made: `use` sig and `alg` that alg when present, `key_ops` when present exactly
 * ["verify"] (the only operation of a public signature key), `ext` a boolean when present; the key type and curve
 * the alg needs; full-length coordinates; RSA of 2048 bits or more. An EC point off its curve is refused when the
 * PEM is made a key (node:crypto `createPublicKey`, in fast-jwt's createVerifier). EC and OKP keys are written
 * straight into their SPKI (half a miss's CPU went to importing the jwk and exporting it as PEM); an RSA key is
 * imported by node:crypto to read its size. The caller has refused private members already. Throws TypeError.
 */
export function embeddedJwkPem(alg: string, jwk: Record<string, unknown>): string {
  const rule = Object.hasOwn(KEY_RULES, alg) ? KEY_RULES[alg] : undefined;
  if (!rule) throw new TypeError(`alg ${alg} is not a DPoP proof algorithm`);
  if (jwk.use !== undefined && jwk.use !== 'sig') throw new TypeError('the JWK "use" must be "sig"');
  if (jwk.alg !== undefined && jwk.alg !== alg) throw new TypeError(`the JWK "alg" must be "${alg}"`);
  if (jwk.ext !== undefined && typeof jwk.ext !== 'boolean')
    throw new TypeError('the JWK "ext" must be a boolean');
  if (
    jwk.key_ops !== undefined &&
    !(Array.isArray(jwk.key_ops) && jwk.key_ops.length === 1 && jwk.key_ops[0] === 'verify')
  )
    throw new TypeError('the JWK "key_ops" must be ["verify"]');
  if (jwk.kty !== rule.kty) throw new TypeError(`alg ${alg} needs a JWK of kty ${rule.kty}`);
  if (rule.crv !== undefined && jwk.crv !== rule.crv)
    throw new TypeError(`alg ${alg} needs the curve ${rule.crv}`);
  if (rule.kty === 'EC')
    return pem(Buffer.concat([rule.spki!, octets(jwk, 'x', rule.bytes), octets(jwk, 'y', rule.bytes)]));
  if (rule.kty === 'OKP') return pem(Buffer.concat([rule.spki!, octets(jwk, 'x', rule.bytes)]));
  let key: KeyObject;
  try {
    // Only the members that make the key are handed to node:crypto.
    key = createPublicKey({
      key: {
        kty: 'RSA',
        n: octets(jwk, 'n').toString('base64url'),
        e: octets(jwk, 'e').toString('base64url'),
      },
      format: 'jwk',
    });
  } catch {
    throw new TypeError('the JWK is not a valid RSA public key');
  }
  if (key.asymmetricKeyType !== 'rsa' || !((key.asymmetricKeyDetails?.modulusLength ?? 0) >= MIN_RSA_BITS))
    throw new TypeError(`alg ${alg} needs an RSA key of ${MIN_RSA_BITS} bits or more`);
  return key.export({ type: 'spki', format: 'pem' }) as string;
}

/** One proof key, ready: its verifier, and what a verified proof returns about it. */
export interface EmbeddedKey {
  /** The header's `alg`: the only algorithm this key's proofs are verified with. */
  readonly alg: string;
  /** RFC 7638 thumbprint of the key. */
  readonly jkt: string;
  /** The header's `jwk`, frozen (it is handed out with every proof verified by this key). */
  readonly jwk: Readonly<JWK>;
  /**
   * Verifies a compact JWS whose protected header is this entry's (signature by this key under `alg`, typ
   * dpop+jwt, no crit, exp/nbf when present) and returns its claims. Throws fast-jwt's TokenError.
   */
  readonly verify: (proof: string) => Record<string, unknown>;
}

/** Keys held at once (a process sees one per active DPoP client); the oldest goes first when full. */
export const EMBEDDED_KEYS_HELD = 1024;
/**
 * A longer protected header (base64url characters) is verified as before but not kept, so that proofs padded with
 * extra members cannot make the cache hold much (the header of an RSA 8192-bit key is ~1.9 k characters).
 */
const LONGEST_KEPT = 2048;

const held = new Map<string, EmbeddedKey>();

/**
 * The key kept for a proof's protected header: its first segment, exactly as sent. The same bytes decode to the
 * same `alg`, `typ` and `jwk`, so an entry never stands for another header (the same key written in another header
 * — members reordered, one added — gets an entry of its own: a miss, not a confusion), and a hit needs no decoding.
 */
export function heldEmbeddedKey(protectedHeader: string): EmbeddedKey | undefined {
  return held.get(protectedHeader);
}

/**
 * Imports a proof's key (see {@link embeddedJwkPem}; throws for one it refuses, and nothing is kept),
 * builds its verifier and thumbprint, and keeps them for `protectedHeader`. The caller has checked the header's typ,
 * that `alg` is one it accepts and that `jwk` has no private members.
 */
export function embeddedKey(protectedHeader: string, alg: string, jwk: Record<string, unknown>): EmbeddedKey {
  const verify = createVerifier({
    // fast-jwt takes a PEM (or a secret) and makes its KeyObject from it once, here.
    key: embeddedJwkPem(alg, jwk),
    // fast-jwt names Ed25519 keys' algorithm EdDSA and checks the key against the list; Ed25519 (RFC 9864) is the
    // same signature, and the header of this entry is always `alg`.
    algorithms: (alg === 'Ed25519' ? ['EdDSA', 'Ed25519'] : [alg]) as never,
    checkTyp: 'dpop+jwt',
    // Its verified-token cache off: each proof is verified, and replay is the jti store's job.
    cache: false,
    // exp and nbf, if a client writes them, hold on the server's clock with no tolerance (as jose held them). The
    // DPoP window is the iat check of verifyDpopProof: fast-jwt's maxAge would have no bound for an iat in the
    // future, and its clockTimestamp is fixed when the verifier is made, so neither is used.
    ignoreExpiration: false,
    ignoreNotBefore: false,
    clockTolerance: 0,
    complete: false,
  }) as unknown as (proof: string) => Record<string, unknown>;
  const entry: EmbeddedKey = {
    alg,
    jkt: jwkThumbprint(jwk),
    jwk: Object.freeze({ ...jwk }) as Readonly<JWK>,
    verify,
  };
  if (protectedHeader.length <= LONGEST_KEPT) {
    if (held.size >= EMBEDDED_KEYS_HELD) held.delete(held.keys().next().value!);
    held.set(protectedHeader, entry);
  }
  return entry;
}

/** How many keys are held, and forgetting them (tests). */
export const embeddedKeys = {
  get size(): number {
    return held.size;
  },
  clear(): void {
    held.clear();
  },
};
