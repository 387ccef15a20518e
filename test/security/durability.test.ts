// Revocations outlive Redis. The Redis here is a throwaway `redis-server --save ''` of this file's own (never the
// shared one): it is killed and started again empty under a running IdP, and again while the IdP is down; a
// gateway started afterwards must still refuse every revoked token with token_revoked.

import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  errorOf,
  type GatewayProcess,
  startGatewayProcess,
  startUpstream,
  type Upstream,
} from '../gateway/helpers.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { postForm, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { startThrowawayRedis, type ThrowawayRedis } from '../helpers/throwaway-redis.ts';

let redis: ThrowawayRedis;
let db: TestDatabase;
let idp: IdpProcess | undefined;
let admin: SeededUser;
let upstream: Upstream;
const gateways: GatewayProcess[] = [];

const withRedis: ThrowawayRedis['run'] = (fn) => redis.run(fn);

/** The IdP; restarted on the same port, so its issuer (and the tokens' `iss`) stays the same. */
const startIdp = (issuer?: string) =>
  startIdpProcess({
    databaseUrl: db.url,
    redisUrl: redis.url,
    env: {
      PLATFORM_ADMIN_EMAILS: admin.email,
      ...(issuer ? { PLATFORM_OIDC_ISSUER: issuer, IDP_PORT: new URL(issuer).port } : {}),
    },
  });

async function startGateway(): Promise<GatewayProcess> {
  const gw = await startGatewayProcess({
    PUBLIC_BASE_URL: 'https://mcp.example.test',
    GATEWAY_SERVICES: 'mail',
    MAIL_MCP_UPSTREAM: upstream.url,
    PLATFORM_ISSUER: idp!.issuer,
    PLATFORM_AUDIENCE: idp!.audience,
    REDIS_URL: redis.url,
  });
  gateways.push(gw);
  return gw;
}

beforeAll(async () => {
  [db, upstream, redis] = await Promise.all([createTestDatabase(), startUpstream(), startThrowawayRedis()]);
  admin = await seedUser(db.pool);
  idp = await startIdp();
});

afterAll(async () => {
  for (const g of gateways) await g.stop();
  await idp?.stop();
  await redis?.stop();
  await upstream?.close();
  await db?.drop();
});

describe('Redis restarted empty', () => {
  let revokedToken: string;
  let revokedUserToken: string;
  let liveToken: string;

  it('under a running IdP: the IdP writes the revocations again when it reconnects', async () => {
    const a = await seedUser(db.pool);
    const b = await seedUser(db.pool);
    const c = await seedUser(db.pool);
    revokedToken = (await signIn(idp!.issuer, a.sessionToken, { scope: 'mcp:mail' })).access_token;
    revokedUserToken = (await signIn(idp!.issuer, b.sessionToken, { scope: 'mcp:mail' })).access_token;
    const adminToken = (await signIn(idp!.issuer, admin.sessionToken, { scope: 'platform:admin' }))
      .access_token;
    expect((await postForm(`${idp!.issuer}/oauth/revoke`, { token: revokedToken })).status).toBe(200);
    const r = await fetch(`${idp!.issuer}/admin/api/revoke-user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${adminToken}` },
      body: JSON.stringify({ email: b.email }),
    });
    expect(r.status).toBe(200);
    await new Promise((res) => setTimeout(res, 1100 - (Date.now() % 1000)));
    liveToken = (await signIn(idp!.issuer, c.sessionToken, { scope: 'mcp:mail' })).access_token;

    const jti = decodeJwt(revokedToken).jti as string;
    await redis.stop();
    await redis.start();
    expect(await withRedis((x) => x.dbsize())).toBeGreaterThanOrEqual(0);
    // The IdP's connection comes back (ioredis retries) and the live revocations are written again.
    await expect
      .poll(() => withRedis((x) => x.get(`platform:deny:jti:${jti}`)), { timeout: 15_000, interval: 100 })
      .toBe('1');
    await expect
      .poll(() => withRedis((x) => x.get(`platform:deny:email:${b.email}`)), { timeout: 5_000 })
      .toMatch(/^\d+$/);
    expect(await withRedis((x) => x.get(`platform:deny:sub:${b.sub}`))).toMatch(/^\d+$/);
  });

  it('a gateway started after the restart refuses the revoked tokens (401 token_revoked)', async () => {
    const gw = await startGateway();
    const mail = `${gw.url}/mail/mcp`;
    for (const token of [revokedToken, revokedUserToken]) {
      const r = await call(mail, { method: 'POST', token });
      expect(r.status).toBe(401);
      expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'token_revoked' });
    }
    expect((await call(mail, { method: 'POST', token: liveToken })).status).toBe(200);
  });

  it('while the IdP is down: the IdP writes them at start-up', async () => {
    const jti = decodeJwt(revokedToken).jti as string;
    const issuer = idp!.issuer;
    await idp!.stop();
    await redis.stop();
    await redis.start();
    expect(await withRedis((x) => x.exists(`platform:deny:jti:${jti}`))).toBe(0);
    idp = await startIdp(issuer);
    await expect
      .poll(() => withRedis((x) => x.get(`platform:deny:jti:${jti}`)), { timeout: 10_000, interval: 100 })
      .toBe('1');
    const gw = await startGateway();
    const r = await call(`${gw.url}/mail/mcp`, { method: 'POST', token: revokedUserToken });
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'token_revoked' });
  });
});
