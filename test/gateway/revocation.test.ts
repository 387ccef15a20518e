// Revocation through Redis, as the IdP and `platform admin` publish it: observed by two gateway processes
// within the contract's 100 ms, enforced on cached tokens, and already-present denylist entries picked up at
// start-up. Unique subjects and jtis keep this file apart from others sharing the channel.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { denyJtiKey, RedisRevocationPublisher } from '../../lib/revocation.ts';
import {
  AUDIENCE,
  errorOf,
  type GatewayProcess,
  type GatewayStack,
  type KeyServer,
  mint,
  platformToken,
  postMail as post,
  startGatewayStack,
} from './helpers.ts';

/** docs/reference.md: a revocation takes effect on every replica within 100 ms of publication. */
const PROPAGATION_BOUND_MS = 100;

let redis: Redis;
let publisher: RedisRevocationPublisher;
let stack: GatewayStack;
let ks: KeyServer;
let gateways: GatewayProcess[] = [];

beforeAll(async () => {
  redis = new Redis(inject('redisUrl'));
  publisher = new RedisRevocationPublisher(redis);
  stack = await startGatewayStack(inject('redisUrl'));
  ks = stack.ks;
  gateways = await Promise.all([stack.gateway(), stack.gateway()]);
});

afterAll(async () => {
  await stack?.stop();
  await redis?.quit();
});

async function token(claims: Record<string, unknown> = {}, iat = 0) {
  const jti = randomUUID();
  const sub = `revocation-test-${randomUUID()}`;
  const t = await platformToken(ks, { sub, email: 'r@example.com', jti, ...claims }, { iat });
  return { t, jti, sub };
}

/** Milliseconds from `start` until `gw` refuses `t` as revoked (requests back to back). */
async function msUntilRevoked(
  gw: GatewayProcess,
  t: string,
  start: number,
  giveUpMs = 2000,
): Promise<number> {
  for (;;) {
    const r = await post(gw, t);
    if (r.status === 401) {
      expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'token_revoked' });
      return performance.now() - start;
    }
    expect(r.status).toBe(200);
    if (performance.now() - start > giveUpMs) return Number.POSITIVE_INFINITY;
  }
}

describe('propagation to every replica', () => {
  it('a jti revoked through Redis is refused by both gateways within 100 ms (the token was cached)', async () => {
    const { t, jti } = await token();
    // Both gateways have verified (and cached) the token.
    for (const gw of gateways) expect((await post(gw, t)).status).toBe(200);
    const start = performance.now();
    const publishing = publisher.denyJti(jti, Math.floor(Date.now() / 1000) + 3600);
    const elapsed = await Promise.all(gateways.map((gw) => msUntilRevoked(gw, t, start)));
    await publishing;
    for (const ms of elapsed) expect(ms).toBeLessThan(PROPAGATION_BOUND_MS);
  });

  it('a subject cut-off revokes tokens issued at or before it, on both gateways within 100 ms', async () => {
    const { t, sub } = await token({}, -10);
    for (const gw of gateways) expect((await post(gw, t)).status).toBe(200);
    const cutoff = Math.floor(Date.now() / 1000);
    const start = performance.now();
    const publishing = publisher.denySubject(sub, cutoff);
    const elapsed = await Promise.all(gateways.map((gw) => msUntilRevoked(gw, t, start)));
    await publishing;
    for (const ms of elapsed) expect(ms).toBeLessThan(PROPAGATION_BOUND_MS);
    // A token issued after the cut-off (the user signed in again) is accepted.
    const later = await mint({
      key: ks.keys[0]!,
      claims: {
        iss: ks.issuer,
        aud: AUDIENCE,
        sub,
        email: 'r@example.com',
        scope: 'mcp:mail',
        iat: cutoff + 1,
      },
    });
    for (const gw of gateways) expect((await post(gw, later)).status).toBe(200);
  });

  it("a machine client's cut-off (revoke-client) revokes the delegated tokens it acts in, nested or not, on both gateways within 100 ms", async () => {
    const agent = `agent-${randomUUID()}`;
    const direct = await token({ act: { sub: agent }, client_id: agent }, -10);
    const nested = await token({ act: { sub: `outer-${randomUUID()}`, act: { sub: agent } } }, -10);
    const own = await token({}, -10);
    for (const gw of gateways) {
      for (const x of [direct, nested, own]) expect((await post(gw, x.t)).status).toBe(200);
    }
    const start = performance.now();
    const publishing = publisher.denySubject(agent, Math.floor(Date.now() / 1000));
    const elapsed = await Promise.all(
      gateways.flatMap((gw) => [msUntilRevoked(gw, direct.t, start), msUntilRevoked(gw, nested.t, start)]),
    );
    await publishing;
    for (const ms of elapsed) expect(ms).toBeLessThan(PROPAGATION_BOUND_MS);
    // The same user's own token (no actor) is untouched.
    for (const gw of gateways) expect((await post(gw, own.t)).status).toBe(200);
  });

  it("revocation of one token leaves the same subject's other tokens alone", async () => {
    const a = await token();
    const b = await mint({
      key: ks.keys[0]!,
      claims: { iss: ks.issuer, aud: AUDIENCE, sub: a.sub, email: 'r@example.com', scope: 'mcp:mail' },
    });
    await publisher.denyJti(a.jti, Math.floor(Date.now() / 1000) + 3600);
    await expect.poll(async () => (await post(gateways[0]!, a.t)).status).toBe(401);
    expect((await post(gateways[0]!, b)).status).toBe(200);
  });
});

describe('start-up', () => {
  it('enforces denylist entries written before the gateway started (copied from Redis, not the channel)', async () => {
    const { t, jti } = await token();
    const sub = await token({}, -10);
    // Written without publishing: only the start-up copy of the denylist can know about these.
    await redis.set(denyJtiKey(jti), '1', 'EX', 600);
    await redis.set(`platform:deny:sub:${sub.sub}`, String(Math.floor(Date.now() / 1000)), 'EX', 600);
    const gw = await stack.gateway();
    expect(errorOf(await post(gw, t)).reason).toBe('token_revoked');
    expect(errorOf(await post(gw, sub.t)).reason).toBe('token_revoked');
    expect((await post(gw, (await token()).t)).status).toBe(200);
  });
});
