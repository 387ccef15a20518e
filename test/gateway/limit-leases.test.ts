// gateway/limits/limits.ts's leases against the real Redis: a limit nobody comes near is counted in Redis a lease
// at a time (not once per request), every admitted request is still counted there, and two replicas sharing one
// counter never admit more than the limit between them — one after the other or all at once.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { VerifiedToken } from '../../gateway/auth/verified-token.ts';
import { RateLimitedError } from '../../gateway/errors.ts';
import { createGatewayLimits, LEASE_MAX, LIMIT_KEY_PREFIX } from '../../gateway/limits/limits.ts';
import type { RedisClient } from '../../lib/redis/client.ts';

let redis: Redis;
/** Counting commands sent by the limiter (rate-limiter-flexible's `rlflxIncr` script), per client. */
let counted = 0;

beforeAll(() => {
  redis = new Redis(inject('redisUrl'), { lazyConnect: false });
});
afterAll(() => redis.disconnect());

/** A Redis client that counts the limiter's counting commands (its `rlflxIncr` script, defined on the client). */
async function countingClient(): Promise<RedisClient> {
  const client = new Redis(inject('redisUrl'));
  afterAll(() => client.disconnect());
  // Ready before counting: the limiter counts in memory while its client is not (rejectIfRedisNotReady).
  await client.ping();
  return new Proxy(client, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (prop === 'rlflxIncr' && typeof v === 'function')
        return (...args: unknown[]) => {
          counted++;
          return v.apply(target, args);
        };
      return v;
    },
  }) as unknown as RedisClient;
}

const caller = (email: string) => ({ kind: 'platform', email, clientId: 'c', sub: 's' }) as VerifiedToken;

/** A replica's limits: `rate` per email on service `svc`, on the shared Redis (a fresh counter per test). */
function replica(rate: string, client: RedisClient) {
  const [count, seconds] = rate.split('/').map(Number) as [number, number];
  return createGatewayLimits([{ service: 'svc', per: 'email', rate: { count, seconds } }], {
    services: ['svc'],
    redis: () => client,
  });
}

/** Whether one request is admitted. */
async function admitted(limits: ReturnType<typeof replica>, email: string): Promise<boolean> {
  try {
    await limits.check('svc', () => [], caller(email));
    return true;
  } catch (e) {
    expect(e).toBeInstanceOf(RateLimitedError);
    return false;
  }
}

describe('rate-limit leases', () => {
  it('a limit far away asks Redis once per lease, and Redis still counts every request', async () => {
    const client = await countingClient();
    const limits = replica('999999999/60', client);
    const email = `far-${randomUUID()}@example.com`;
    counted = 0;
    for (let i = 0; i < 1000; i++) expect(await admitted(limits, email)).toBe(true);
    // One request to learn what remains, then a lease of LEASE_MAX (+1: the request that takes it) at a time.
    expect(counted).toBeLessThanOrEqual(Math.ceil(1000 / LEASE_MAX) + 2);
    expect(counted).toBeGreaterThan(1);
    const keys = await redis.keys(`${LIMIT_KEY_PREFIX}:*${email}`);
    expect(keys).toHaveLength(1);
    // Every admitted request is in the shared counter (with, at most, one lease not yet spent).
    const inRedis = Number(await redis.get(keys[0]!));
    expect(inRedis).toBeGreaterThanOrEqual(1000);
    expect(inRedis).toBeLessThanOrEqual(1000 + LEASE_MAX);
  });

  it('near the limit every request asks Redis: a small limit is exact', async () => {
    const client = await countingClient();
    const limits = replica('10/60', client);
    const email = `near-${randomUUID()}@example.com`;
    counted = 0;
    const results = [];
    for (let i = 0; i < 14; i++) results.push(await admitted(limits, email));
    expect(results.filter(Boolean)).toHaveLength(10);
    expect(results.slice(10)).toEqual([false, false, false, false]);
    expect(counted).toBe(14);
  });

  it('two replicas taking turns admit exactly the limit between them', async () => {
    const [a, b] = [replica('300/60', await countingClient()), replica('300/60', await countingClient())];
    const email = `turns-${randomUUID()}@example.com`;
    let ok = 0;
    for (let i = 0; i < 500; i++) if (await admitted(i % 2 ? a : b, email)) ok++;
    expect(ok).toBe(300);
  });

  it('two replicas under concurrent load never admit more than the limit', async () => {
    const [a, b] = [replica('400/60', await countingClient()), replica('400/60', await countingClient())];
    const email = `burst-${randomUUID()}@example.com`;
    let ok = 0;
    for (let round = 0; round < 10; round++) {
      const results = await Promise.all(Array.from({ length: 60 }, (_, i) => admitted(i % 2 ? a : b, email)));
      ok += results.filter(Boolean).length;
    }
    expect(ok).toBeLessThanOrEqual(400);
    // Leases taken and not spent can only make the limit bite early, by at most one lease per replica.
    expect(ok).toBeGreaterThanOrEqual(400 - 2 * LEASE_MAX);
  });
});
