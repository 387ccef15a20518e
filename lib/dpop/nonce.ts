import { createHmac, timingSafeEqual } from 'node:crypto';

/** How long one nonce bucket lasts; a nonce is accepted in its bucket and the next one. */
export const DPOP_NONCE_BUCKET_SECONDS = 300;

/**
 * Stateless server nonces (RFC 9449 §8): an HMAC of the current time bucket under a key every replica shares,
 * so any replica accepts any replica's nonce, for between one and two buckets.
 */
export class DpopNonces {
  readonly #key: Buffer;
  readonly #bucketSeconds: number;
  readonly #now: () => number;
  constructor(key: string | Buffer, o: { bucketSeconds?: number; now?: () => number } = {}) {
    this.#key = typeof key === 'string' ? Buffer.from(key) : key;
    this.#bucketSeconds = o.bucketSeconds ?? DPOP_NONCE_BUCKET_SECONDS;
    this.#now = o.now ?? Date.now;
  }
  #bucket(): number {
    return Math.floor(this.#now() / 1000 / this.#bucketSeconds);
  }
  #forBucket(bucket: number): string {
    return createHmac('sha256', this.#key).update(`dpop-nonce:${bucket}`).digest('base64url');
  }
  issueNonce(): string {
    return this.#forBucket(this.#bucket());
  }
  nonceValid(nonce: string): boolean {
    const given = Buffer.from(nonce);
    const b = this.#bucket();
    for (const bucket of [b, b - 1]) {
      const want = Buffer.from(this.#forBucket(bucket));
      if (given.length === want.length && timingSafeEqual(given, want)) return true;
    }
    return false;
  }
}
