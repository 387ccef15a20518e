import type { VerifiedToken } from './verified-token.ts';

/**
 * Characters of the signature used as the map key. Hashing the whole ~800-character token costs ~2 µs per
 * lookup (V8 hashes every character of a fresh header string); the signature's tail is as unpredictable as the
 * whole, and a hit still requires the full token to be equal, so a crafted collision is only a cache miss.
 */
const KEY_LENGTH = 32;

interface Entry {
  token: string;
  verified: VerifiedToken;
}

/**
 * Verified tokens by their exact compact string, so a repeated bearer costs a map lookup instead of an RSA
 * verification. Bounded (oldest insertion evicted first) and never serving an entry at or after its `exp`
 * (past exp a token is fully re-verified, leeway included). Only signature and time validity are cached;
 * audience, scope and revocation are checked on every request.
 */
export class TokenCache {
  readonly #max: number;
  #map = new Map<string, Entry>();

  constructor(max: number) {
    this.#max = max;
  }

  get size(): number {
    return this.#map.size;
  }

  get(token: string, nowSeconds: number): VerifiedToken | undefined {
    const key = token.slice(-KEY_LENGTH);
    const hit = this.#map.get(key);
    if (hit === undefined || hit.token !== token) return undefined;
    if (hit.verified.exp <= nowSeconds) {
      this.#map.delete(key);
      return undefined;
    }
    return hit.verified;
  }

  set(token: string, verified: VerifiedToken, nowSeconds: number): void {
    if (this.#max === 0 || verified.exp <= nowSeconds) return;
    const key = token.slice(-KEY_LENGTH);
    if (this.#map.size >= this.#max && !this.#map.has(key)) {
      const oldest = this.#map.keys().next();
      if (!oldest.done) this.#map.delete(oldest.value);
    }
    this.#map.set(key, { token, verified });
  }

  /** Drops everything (an issuer withdrew a key: tokens it signed must be checked again). */
  clear(): void {
    this.#map = new Map();
  }
}
