// Redis stopped and restarted under two running gateways (one fail-open, one fail-closed). The Redis here
// is a throwaway `redis-server` on its own port, never the machine's shared one.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisRevocationPublisher } from '../../lib/revocation.ts';
import { startThrowawayRedis, type ThrowawayRedis } from '../helpers/throwaway-redis.ts';
import {
  errorOf,
  type GatewayProcess,
  type GatewayStack,
  platformToken,
  postMail as post,
  startGatewayStack,
} from './helpers.ts';

let redis: ThrowawayRedis;
let stack: GatewayStack;
let open: GatewayProcess;
let closed: GatewayProcess;

/** Publishes on the throwaway Redis through a short-lived connection (the way `platform admin` would). */
async function revoke(jti: string): Promise<void> {
  await redis.run((r) => new RedisRevocationPublisher(r).denyJti(jti, Math.floor(Date.now() / 1000) + 3600));
}

beforeAll(async () => {
  redis = await startThrowawayRedis();
  stack = await startGatewayStack(redis.url);
  [open, closed] = await Promise.all([
    stack.gateway({ GATEWAY_REVOCATION_MODE: 'fail-open' }),
    stack.gateway({ GATEWAY_REVOCATION_MODE: 'fail-closed' }),
  ]);
});

afterAll(async () => {
  await stack?.stop();
  await redis?.stop();
});

async function token() {
  const jti = randomUUID();
  const t = await platformToken(stack.ks, { email: 'o@example.com', jti });
  return { t, jti };
}

const outageWarnings = (gw: GatewayProcess) =>
  gw.logs().filter((l) => l.msg === 'redis unavailable: serving from memory until it is back');

describe('Redis stopped and restarted mid-test', () => {
  it('keeps answering from memory, warns once, and recovers by itself', async () => {
    const warm = await token();
    const revoked = await token();
    for (const gw of [open, closed]) expect((await post(gw, warm.t)).status).toBe(200);
    await revoke(revoked.jti);
    for (const gw of [open, closed]) {
      await expect.poll(async () => errorOf(await post(gw, revoked.t)).reason).toBe('token_revoked');
    }

    await redis.stop();
    // fail-closed notices at once (the connection closes) and refuses what it cannot vouch for …
    await expect.poll(async () => (await post(closed, warm.t)).status).toBe(503);
    const r = await post(closed, warm.t);
    expect(errorOf(r)).toMatchObject({ code: 'REVOCATION_UNAVAILABLE', reason: 'revocation_state_unknown' });
    // … while fail-open keeps serving: a cached token, a fresh one (the key set is in memory), and the
    // revocation it learned before the outage still holds on both.
    expect((await post(open, warm.t)).status).toBe(200);
    expect((await post(open, (await token()).t)).status).toBe(200);
    for (const gw of [open, closed]) expect(errorOf(await post(gw, revoked.t)).reason).toBe('token_revoked');

    // ioredis retries every ≤ 1 s; however many attempts fail, the outage is logged once.
    await new Promise((res) => setTimeout(res, 1500));
    for (const gw of [open, closed]) expect(outageWarnings(gw)).toHaveLength(1);

    await redis.start();
    await expect.poll(async () => (await post(closed, warm.t)).status, { timeout: 10_000 }).toBe(200);
    await expect
      .poll(() => open.logs().some((l) => l.msg === 'redis reachable again'), { timeout: 10_000 })
      .toBe(true);
    // The subscription is back: a revocation published after the restart reaches both.
    await expect
      .poll(() => open.logs().filter((l) => l.msg === 'revocation mirror in sync with redis').length)
      .toBe(2);
    await revoke(warm.jti);
    for (const gw of [open, closed]) {
      await expect.poll(async () => errorOf(await post(gw, warm.t)).reason).toBe('token_revoked');
    }
    for (const gw of [open, closed]) {
      expect(outageWarnings(gw)).toHaveLength(1);
      expect(gw.logs().filter((l) => (l.level as number) >= 50)).toEqual([]);
    }
  });
});
