import type { RedisClient } from './redis/client.ts';

// Values accepted once across every replica (an assertion's jti): `firstUse(key, ttl)` is true exactly once per
// key within ttl seconds. Redis `SET NX EX` (one round trip, shared by the replicas), or this process's memory
// for the in-process stack of `platform dev` and unit tests.

export interface SingleUseStore {
  firstUse(key: string, ttlSeconds: number): Promise<boolean>;
}

export class RedisSingleUseStore implements SingleUseStore {
  readonly #redis: RedisClient;
  constructor(redis: RedisClient) {
    this.#redis = redis;
  }
  async firstUse(key: string, ttlSeconds: number): Promise<boolean> {
    return (await this.#redis.set(key, '1', 'EX', Math.max(1, Math.ceil(ttlSeconds)), 'NX')) === 'OK';
  }
}

/** One process only: entries expire lazily, swept when the map grows. */
export class MemorySingleUseStore implements SingleUseStore {
  readonly #seen = new Map<string, number>();
  readonly #now: () => number;
  constructor(now: () => number = Date.now) {
    this.#now = now;
  }
  async firstUse(key: string, ttlSeconds: number): Promise<boolean> {
    const now = this.#now();
    if (this.#seen.size >= 10_000)
      for (const [k, until] of this.#seen) if (until <= now) this.#seen.delete(k);
    const until = this.#seen.get(key);
    if (until !== undefined && until > now) return false;
    this.#seen.set(key, now + ttlSeconds * 1000);
    return true;
  }
}
