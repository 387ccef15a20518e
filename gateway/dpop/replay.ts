import { type DpopReplayStore, MemoryDpopReplayStore, RedisDpopReplayStore } from '../../lib/dpop/index.ts';
import type { RedisClient } from '../../lib/redis/client.ts';
import type { RevocationMode } from '../config.ts';
import { GatewayError } from '../errors.ts';

/** 503 in `fail-closed` mode: Redis did not answer, so a proof's single use across replicas cannot be known. */
export class ReplayUnavailableError extends GatewayError {
  readonly status = 503;
  readonly code = 'DPOP_REPLAY_UNAVAILABLE';
  override readonly name = 'ReplayUnavailableError';
  constructor() {
    super('dpop_replay_unknown', 'the DPoP replay cache is unavailable (Redis unreachable); retry shortly');
  }
}

/**
 * The gateway's replay store: Redis (`platform:dpop:jti:*`, one `SET NX EX`, shared by every replica). While
 * Redis does not answer, GATEWAY_REVOCATION_MODE decides as it does for revocation: `fail-open` falls back to
 * this replica's memory (a proof stays single-use here, not across replicas), `fail-closed` refuses with 503.
 */
export function gatewayReplayStore(redis: RedisClient, mode: RevocationMode): DpopReplayStore {
  const shared = new RedisDpopReplayStore(redis);
  const local = new MemoryDpopReplayStore();
  return {
    async firstUse(jti, jkt, ttlSeconds) {
      try {
        return await shared.firstUse(jti, jkt, ttlSeconds);
      } catch {
        // The outage itself is logged once by redis.ts (RedisOutage).
        if (mode === 'fail-closed') throw new ReplayUnavailableError();
        return local.firstUse(jti, jkt, ttlSeconds);
      }
    },
  };
}
