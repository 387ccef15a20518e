import { createPublicKey, type KeyObject } from 'node:crypto';

/**
 * The usable RS256 verification keys of a JWKS document, by kid. Keys that are not RSA, are marked for
 * another use or algorithm, have no kid, or are shorter than 2048 bits (RFC 7518 §3.3) are skipped rather
 * than failing the set: Entra publishes keys of several kinds side by side. Certificates (`x5c`) are ignored;
 * the key is built from `n` and `e` only.
 */
export function parseJwks(text: string): Map<string, KeyObject> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error('key set is not JSON');
  }
  const list = (doc as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(list)) throw new Error('key set has no "keys" array');
  const out = new Map<string, KeyObject>();
  for (const jwk of list as Array<Record<string, unknown>>) {
    if (jwk === null || typeof jwk !== 'object') continue;
    if (jwk.kty !== 'RSA' || typeof jwk.kid !== 'string' || jwk.kid === '') continue;
    if (jwk.use !== undefined && jwk.use !== 'sig') continue;
    if (jwk.alg !== undefined && jwk.alg !== 'RS256') continue;
    if (typeof jwk.n !== 'string' || typeof jwk.e !== 'string') continue;
    let key: KeyObject;
    try {
      key = createPublicKey({ key: { kty: 'RSA', n: jwk.n, e: jwk.e }, format: 'jwk' });
    } catch {
      continue;
    }
    if ((key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) continue;
    if (!out.has(jwk.kid)) out.set(jwk.kid, key);
  }
  if (out.size === 0) throw new Error('key set holds no usable RS256 key');
  return out;
}
