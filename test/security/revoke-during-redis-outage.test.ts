// An administrator revokes while the IdP's Redis is down (a throwaway redis-server of the test's own, never the
// shared one). With a DPoP-bound admin token (what `platform login` gives) the admin API records the proof's
// single use in Postgres, so the request is checked, not refused: revoke-user answers 200 with
// `published: false`, the IdP refuses the user's token at once (its check reads Postgres), the same proof sent
// again is still refused (replay protection does not lapse with Redis), and when Redis returns the revocation
// is written to it for the gateways. The IdP's Redis errors meanwhile are logged with back-off.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { type DpopKey, dpopSignIn, newDpopKey } from '../helpers/dpop.ts';
import { signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { startThrowawayRedis, type ThrowawayRedis } from '../helpers/throwaway-redis.ts';

let db: TestDatabase;
let redis: ThrowawayRedis;
let idp: IdpProcess;
let admin: SeededUser;
let victim: SeededUser;
let key: DpopKey;
let adminToken: string;

beforeAll(async () => {
  [db, redis] = await Promise.all([createTestDatabase(), startThrowawayRedis()]);
  [admin, victim] = [await seedUser(db.pool), await seedUser(db.pool)];
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: redis.url,
    env: { PLATFORM_ADMIN_EMAILS: admin.email, PLATFORM_ADMIN_REQUIRE_DPOP: 'on' },
  });
  key = await newDpopKey();
  adminToken = (
    await dpopSignIn(idp.issuer, admin.sessionToken, key, { scope: 'openid email platform:admin' })
  ).access_token;
}, 60_000);

afterAll(async () => {
  await idp?.stop();
  await redis?.stop();
  await db?.drop();
});

async function adminPost(path: string, body: unknown, proof?: string) {
  const url = `${idp.issuer}/admin/api/${path}`;
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      authorization: `DPoP ${adminToken}`,
      dpop: proof ?? (await key.proof('POST', url, { accessToken: adminToken })),
      'content-type': 'application/json',
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

const userinfo = async (token: string) =>
  (await fetch(`${idp.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${token}` } })).status;

describe('revoking while Redis is down', () => {
  it('revoke-user answers 200 published:false, the IdP refuses the token, a replayed proof is refused', async () => {
    const victimToken = (await signIn(idp.issuer, victim.sessionToken)).access_token;
    const clientToken = (await signIn(idp.issuer, admin.sessionToken)).access_token;
    expect(await userinfo(victimToken)).toBe(200);
    await redis.stop();

    // A client's own revocation (RFC 7009) has no answer field to say so: 503 naming Redis, recorded all the same.
    const own = await fetch(`${idp.issuer}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: clientToken, client_id: 'platform-cli' }),
    });
    expect(own.status).toBe(503);
    expect(((await own.json()) as { error_description: string }).error_description).toContain(
      'Redis is unreachable',
    );
    expect(await userinfo(clientToken)).toBe(401);

    const url = `${idp.issuer}/admin/api/revoke-user`;
    const proof = await key.proof('POST', url, { accessToken: adminToken });
    const r = await adminPost('revoke-user', { email: victim.email }, proof);
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    expect(r.json).toMatchObject({ email: victim.email, published: false });
    expect(await userinfo(victimToken)).toBe(401);

    const replayed = await adminPost('revoke-user', { email: victim.email }, proof);
    expect(replayed.status).toBe(401);
    expect(replayed.json.error).toBe('invalid_dpop_proof');

    // A refusal Redis causes says so: the token endpoint's proofs are still recorded in Redis.
    const refused = await fetch(`${idp.issuer}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        dpop: await key.proof('POST', `${idp.issuer}/oauth/token`),
      },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: 'x',
        client_id: 'platform-cli',
      }),
    });
    const body = (await refused.json()) as { error: string; error_description: string };
    expect(refused.status).toBe(503);
    expect(body.error_description).toContain('Redis is unreachable');
  });

  it('writes the revocation to Redis when it returns, and logged its errors with back-off', async () => {
    await redis.start();
    await expect
      .poll(() => redis.run((r) => r.get(`platform:deny:email:${victim.email}`)), { timeout: 15_000 })
      .not.toBeNull();
    await idp.waitFor(/redis connection restored/);
    const errors = idp.logs().filter((l) => l.msg === 'redis error');
    expect(errors.length).toBeGreaterThan(0);
    // Every line after the first stands for the errors it did not log.
    expect(errors.every((l) => typeof l.repeated === 'number')).toBe(true);
    // And the admin API answers as before.
    const again = await adminPost('revoke-user', { email: victim.email });
    expect(again.json.published).toBe(true);
  });
});
