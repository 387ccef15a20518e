// Redis Sentinel failover with real processes: a primary, a replica and three Sentinels (all password-protected)
// of the test's own; a real IdP (REDIS_URL=redis+sentinel://…?sentinel_password=…) revoking every 50 ms, two
// real gateways (REDIS_SENTINELS + REDIS_SENTINEL_MASTER + REDIS_PASSWORD + REDIS_SENTINEL_PASSWORD) and one
// started after the failover. The primary is SIGKILLed just after acknowledging a revocation its frozen replica
// never received: every acknowledged revocation must still be refused by every gateway within 5 s of the
// promotion, and the IdP's rate limits must keep counting in Redis.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatRedisUrl } from '../../lib/redis/config.ts';
import { onNode, type SentinelSet, startSentinelSet } from '../helpers/redis-ha.ts';
import {
  type HaStack,
  rateLimitsAfterFailover,
  revocationsAcrossFailover,
  startHaStack,
} from '../helpers/revocation-failover.ts';

let set: SentinelSet;
let stack: HaStack;

beforeAll(async () => {
  set = await startSentinelSet();
  stack = await startHaStack({
    idpRedisUrl: formatRedisUrl({
      kind: 'sentinel',
      tls: false,
      sentinels: set.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
      name: set.name,
      db: 0,
      password: set.password,
      sentinelPassword: set.sentinelPassword,
    }),
    gatewayRedisEnv: {
      REDIS_SENTINELS: set.sentinelList,
      REDIS_SENTINEL_MASTER: set.name,
      REDIS_PASSWORD: set.password,
      REDIS_SENTINEL_PASSWORD: set.sentinelPassword,
    },
  });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await set?.stop();
});

describe('Redis Sentinel failover', () => {
  it('no acknowledged revocation is lost; every gateway enforces all of them within 5 s; rate limits still count', async () => {
    const exists = async (key: string) =>
      (await onNode(await set.masterPort(), set.password, (r) => r.exists(key))) === 1;
    const report = await revocationsAcrossFailover(stack, {
      jtiOnDoomedMaster: async () => crypto.randomUUID(),
      freezeReplica: async () => {
        set.replica.pause();
        await onNode(set.primary.port, set.password, (r) => r.call('CLIENT', 'KILL', 'TYPE', 'replica'));
      },
      killMaster: async () => {
        await set.primary.kill();
        set.replica.resume();
      },
      failedOver: async () => {
        const deadline = Date.now() + 30_000;
        while ((await set.masterPort().catch(() => set.primary.port)) !== set.replica.port) {
          if (Date.now() > deadline) throw new Error('the Sentinels did not promote the replica');
          await new Promise((r) => setTimeout(r, 50));
        }
      },
      exists,
    });
    console.log(`sentinel failover: ${JSON.stringify(report)}`);
    expect(report.acknowledged).toBeGreaterThan(10);
    await rateLimitsAfterFailover(stack, { exists });
  });
});
