import { createHash } from 'node:crypto';
import type { RedisClient } from '../redis/client.ts';

/** A proof's jti, once seen (docs/reference.md § Redis keys): keyed per key so two clients' jti never collide. */
export const dpopJtiKey = (jti: string, jkt: string) =>
  `platform:dpop:jti:${createHash('sha256').update(`${jkt}${jti}`).digest('hex')}`;

/** Records proofs seen; `firstUse` is true exactly once per (jti, jkt) within ttlSeconds. */
export interface DpopReplayStore {
  firstUse(jti: string, jkt: string, ttlSeconds: number): Promise<boolean>;
}

/** Shared by every replica: one `SET NX EX` round trip. */
export class RedisDpopReplayStore implements DpopReplayStore {
  readonly #redis: RedisClient;
  constructor(redis: RedisClient) {
    this.#redis = redis;
  }
  async firstUse(jti: string, jkt: string, ttlSeconds: number): Promise<boolean> {
    const r = await this.#redis.set(
      dpopJtiKey(jti, jkt),
      '1',
      'EX',
      Math.max(1, Math.ceil(ttlSeconds)),
      'NX',
    );
    return r === 'OK';
  }
}

/** One process only (`platform dev`, tests): entries expire lazily, swept when the map grows. */
export class MemoryDpopReplayStore implements DpopReplayStore {
  readonly #seen = new Map<string, number>();
  readonly #now: () => number;
  constructor(now: () => number = Date.now) {
    this.#now = now;
  }
  async firstUse(jti: string, jkt: string, ttlSeconds: number): Promise<boolean> {
    const now = this.#now();
    if (this.#seen.size >= 10_000) {
      for (const [k, until] of this.#seen) if (until <= now) this.#seen.delete(k);
    }
    const key = dpopJtiKey(jti, jkt);
    const until = this.#seen.get(key);
    if (until !== undefined && until > now) return false;
    this.#seen.set(key, now + ttlSeconds * 1000);
    return true;
  }
}
