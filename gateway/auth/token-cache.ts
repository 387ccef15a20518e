import type { VerifiedToken } from './verified-token.ts';

/**
 * Verified tokens by their exact compact string, so a repeated bearer costs a map lookup instead of an RSA
 * verification. Bounded (oldest insertion evicted first) and never serving an entry at or after its `exp`
 * (past exp a token is fully re-verified, leeway included). Only signature and time validity are cached;
 * audience, scope and revocation are checked on every request.
 */
export class TokenCache {
  readonly #max: number;
  #map = new Map<string, VerifiedToken>();

  constructor(max: number) {
    this.#max = max;
  }

  get size(): number {
    return this.#map.size;
  }

  get(token: string, nowSeconds: number): VerifiedToken | undefined {
    const hit = this.#map.get(token);
    if (hit === undefined) return undefined;
    if (hit.exp <= nowSeconds) {
      this.#map.delete(token);
      return undefined;
    }
    return hit;
  }

  set(token: string, value: VerifiedToken, nowSeconds: number): void {
    if (this.#max === 0 || value.exp <= nowSeconds) return;
    if (this.#map.size >= this.#max) {
      const oldest = this.#map.keys().next();
      if (!oldest.done) this.#map.delete(oldest.value);
    }
    this.#map.set(token, value);
  }

  /** Drops everything (an issuer withdrew a key: tokens it signed must be checked again). */
  clear(): void {
    this.#map = new Map();
  }
}
