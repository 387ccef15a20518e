// Attack (issue 17, "revocations survive Redis losing its data"): Redis is flushed (or fails over empty) while the
// IdP keeps its connection, so the old replay-on-reconnect never ran and revoked tokens worked again at gateways
// started afterwards. A throwaway redis-server (never the shared one), a real IdP and gateways: a revoked token
// and a revoked user's token, FLUSHALL, a second gateway started after the loss; within the contract's 5 s both
// gateways refuse both tokens with token_revoked again, and the denylist keys are back in Redis.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, errorOf, type GatewayProcess } from '../gateway/helpers.ts';
import { seedUser } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { type SecurityStack, startSecurityStack } from '../helpers/security-stack.ts';
import { startThrowawayRedis, type ThrowawayRedis } from '../helpers/throwaway-redis.ts';

const BOUND_MS = 5000;
let redis: ThrowawayRedis;
let stack: SecurityStack;

beforeAll(async () => {
  redis = await startThrowawayRedis();
  stack = await startSecurityStack({ redisUrl: redis.url });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await redis?.stop();
});

const via = (g: GatewayProcess, t: string) => call(`${g.url}/mail/mcp`, { method: 'POST', token: t });

describe('revocations survive Redis losing its data', () => {
  it('after FLUSHALL, every gateway (one started after the loss too) refuses the revoked tokens within 5 s', async () => {
    const [a, b, bystander] = await Promise.all([
      seedUser(stack.db.pool),
      seedUser(stack.db.pool),
      seedUser(stack.db.pool),
    ]);
    const tokenA = (await signIn(stack.idp.issuer, a.sessionToken, { scope: 'openid mcp:mail' }))
      .access_token;
    const tokenB = (await signIn(stack.idp.issuer, b.sessionToken, { scope: 'openid mcp:mail' }))
      .access_token;
    const fine = (await signIn(stack.idp.issuer, bystander.sessionToken, { scope: 'openid mcp:mail' }))
      .access_token;
    const jti = String(decodeJwt(tokenA).jti);
    expect((await stack.adminApi('POST', '/admin/api/revoke-token', { jti })).status).toBe(200);
    expect((await stack.adminApi('POST', '/admin/api/revoke-user', { email: b.email })).status).toBe(200);
    for (const t of [tokenA, tokenB])
      await expect.poll(async () => (await stack.viaGateway(t)).status).toBe(401);

    await redis.run((r) => r.flushall());
    const flushed = Date.now();
    const late = await stack.anotherGateway();

    for (const g of [stack.gateway, late]) {
      for (const t of [tokenA, tokenB]) {
        await expect
          .poll(async () => errorOf(await via(g, t)).reason, {
            timeout: BOUND_MS - (Date.now() - flushed),
            interval: 50,
          })
          .toBe('token_revoked');
      }
      expect((await via(g, fine)).status).toBe(200);
    }
    expect(Date.now() - flushed).toBeLessThanOrEqual(BOUND_MS);
    expect(await redis.run((r) => r.exists(`platform:deny:jti:${jti}`))).toBe(1);
    expect(await redis.run((r) => r.exists(`platform:deny:email:${b.email}`))).toBe(1);
  });
});
