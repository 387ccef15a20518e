import {
  type CryptoKey,
  calculateJwkThumbprint,
  EmbeddedJWK,
  type FlattenedJWSInput,
  type JWK,
  type JWSHeaderParameters,
} from 'jose';

// A DPoP client signs every proof with the same key, and each proof carries that key in its `jwk` header. jose's
// EmbeddedJWK imports it again for every proof (WebCrypto importKey, ~100 µs of CPU a proof), and the RFC 7638
// thumbprint the token is bound to costs another ~40 µs (WebCrypto digest); docs/gateway.md § What DPoP costs.
// Both depend only on the header's `alg` and `jwk`, so they are kept per (alg, jwk): a proof whose key was seen
// before skips the import and the digest. Its signature and claims are still verified, every time.

/** RFC 7638 SHA-256 thumbprint of a public JWK, base64url: what `cnf.jkt` holds. */
export const jwkThumbprint = (jwk: JWK) => calculateJwkThumbprint(jwk, 'sha256');

/** What one embedded key resolves to: the imported public key (jose's own import) and its thumbprint. */
interface EmbeddedKey {
  key: CryptoKey;
  jkt: string;
}

/** Keys held at once (a process sees one per active DPoP client); the oldest goes first when full. */
export const EMBEDDED_KEYS_HELD = 1024;
/**
 * A longer `alg` + `jwk` is verified as before but not kept, so that proofs padded with extra members cannot make
 * the cache hold much (an RSA 8192-bit public JWK is ~1.4 kB).
 */
const LONGEST_KEPT = 2048;

const held = new Map<string, EmbeddedKey>();
/** Each key this module resolved, kept or not, to its thumbprint: what a verified proof's key is bound by. */
const thumbprints = new WeakMap<CryptoKey, string>();

/**
 * The cache's key: exactly the `alg` and `jwk` the import reads. JSON.stringify of the parsed header member gives
 * the same string only for the same members, so one entry never stands for another key (the same key with its
 * members in another order gets an entry of its own: a miss, not a confusion).
 */
function entryId(header: JWSHeaderParameters): string | undefined {
  if (typeof header.alg !== 'string' || header.jwk === null || typeof header.jwk !== 'object')
    return undefined;
  const id = `${header.alg}\n${JSON.stringify(header.jwk)}`;
  return id.length <= LONGEST_KEPT ? id : undefined;
}

async function resolve(header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<EmbeddedKey> {
  const id = entryId(header);
  const hit = id === undefined ? undefined : held.get(id);
  if (hit) return hit;
  // jose's own checks and import: a jwk it refuses throws here, and nothing is kept.
  const key = (await EmbeddedJWK(header, token)) as CryptoKey;
  const entry: EmbeddedKey = { key, jkt: await jwkThumbprint(header.jwk as JWK) };
  thumbprints.set(key, entry.jkt);
  if (id !== undefined) {
    if (held.size >= EMBEDDED_KEYS_HELD) held.delete(held.keys().next().value!);
    held.set(id, entry);
  }
  return entry;
}

/** The key resolver for jose's jwtVerify: EmbeddedJWK, remembered per (alg, jwk). */
export async function cachedEmbeddedJwk(
  header: JWSHeaderParameters,
  token: FlattenedJWSInput,
): Promise<CryptoKey> {
  return (await resolve(header, token)).key;
}

/**
 * The RFC 7638 thumbprint of the key a proof was verified with (the `key` jwtVerify returns after resolving it
 * with {@link cachedEmbeddedJwk}): looked up, not computed again.
 */
export function embeddedKeyThumbprint(key: unknown): string | undefined {
  return typeof key === 'object' && key !== null ? thumbprints.get(key as CryptoKey) : undefined;
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
