import { createHash } from 'node:crypto';
import type { RedisClient } from '../redis/client.ts';
import { MemorySingleUseStore, RedisSingleUseStore, type SingleUseStore } from '../single-use.ts';

/** A proof's jti, once seen (docs/reference.md § Redis keys): keyed per key so two clients' jti never collide. */
export const dpopJtiKey = (jti: string, jkt: string) =>
  `platform:dpop:jti:${createHash('sha256').update(`${jkt}${jti}`).digest('hex')}`;

/** Records proofs seen; `firstUse` is true exactly once per (jti, jkt) within ttlSeconds. */
export interface DpopReplayStore {
  firstUse(jti: string, jkt: string, ttlSeconds: number): Promise<boolean>;
}

/** A proof's (jti, jkt) as a single-use key (lib/single-use.ts). */
class ProofsSeen implements DpopReplayStore {
  readonly #store: SingleUseStore;
  constructor(store: SingleUseStore) {
    this.#store = store;
  }
  firstUse(jti: string, jkt: string, ttlSeconds: number): Promise<boolean> {
    return this.#store.firstUse(dpopJtiKey(jti, jkt), ttlSeconds);
  }
}

/** Shared by every replica: one `SET NX EX` round trip. */
export class RedisDpopReplayStore extends ProofsSeen {
  constructor(redis: RedisClient) {
    super(new RedisSingleUseStore(redis));
  }
}

/** One process only (`platform dev`, tests): entries expire lazily, swept when the map grows. */
export class MemoryDpopReplayStore extends ProofsSeen {
  constructor(now: () => number = Date.now) {
    super(new MemorySingleUseStore(now));
  }
}
