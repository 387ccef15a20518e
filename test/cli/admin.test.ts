// `platform admin`: revocation that the gateway sees instantly (Redis keys and channel) and the audit list.

import { Redis } from 'ioredis';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, seedUser, type TestDatabase } from '../helpers/database.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess, startPlatform } from '../helpers/processes.ts';

let db: TestDatabase;
let idp: IdpProcess;
let redis: Redis;

beforeAll(async () => {
  db = await createTestDatabase();
  idp = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl') });
  redis = new Redis(inject('redisUrl'));
});
afterAll(async () => {
  redis?.disconnect();
  await idp?.stop();
  await db?.drop();
});

const admin = async (args: string[]) => {
  const p = startPlatform(['admin', ...args], { DATABASE_URL: db.url, REDIS_URL: inject('redisUrl') });
  const code = await p.exited;
  return { code, out: p.output() };
};

describe('platform admin', () => {
  it('revoke-user revokes every refresh token and sets a subject cut-off, published on the channel', async () => {
    const user = await seedUser(db.pool, { email: 'Bob@Example.com' });
    const a = await signIn(idp.issuer, user.sessionToken);
    const b = await signIn(idp.issuer, user.sessionToken);
    const bystander = await seedUser(db.pool);
    const c = await signIn(idp.issuer, bystander.sessionToken);

    const sub = new Redis(inject('redisUrl'));
    const seen: string[] = [];
    await sub.subscribe('platform:revocations');
    sub.on('message', (_ch, m) => seen.push(m));
    try {
      const before = Math.floor(Date.now() / 1000);
      const r = await admin(['revoke-user', '--email', 'BOB@example.com']);
      expect(r.code, r.out).toBe(0);
      expect(r.out).toMatch(/2 refresh token/);
      const cutoff = Number(await redis.get(`platform:deny:sub:${user.sub}`));
      expect(cutoff).toBeGreaterThanOrEqual(before);
      expect(cutoff).toBeGreaterThanOrEqual(decodeJwt(b.access_token).iat!);
      expect(await redis.ttl(`platform:deny:sub:${user.sub}`)).toBeGreaterThan(3500);
      await expect.poll(() => seen.map((m) => JSON.parse(m))).toContainEqual({ sub: user.sub, cutoff });
    } finally {
      sub.disconnect();
    }
    expect((await refresh(idp.issuer, a.refresh_token)).json.error).toBe('invalid_grant');
    expect((await refresh(idp.issuer, b.refresh_token)).json.error).toBe('invalid_grant');
    expect((await refresh(idp.issuer, c.refresh_token)).status).toBe(200);
  });

  it('revoke-token puts the jti on the denylist until the token expires', async () => {
    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken);
    const { jti, exp } = decodeJwt(t.access_token);
    const r = await admin(['revoke-token', '--jti', jti as string]);
    expect(r.code, r.out).toBe(0);
    expect(await redis.get(`platform:deny:jti:${jti}`)).toBe('1');
    const ttl = await redis.ttl(`platform:deny:jti:${jti}`);
    expect(Math.abs(ttl - (exp! - Math.floor(Date.now() / 1000)))).toBeLessThanOrEqual(2);
  });

  it('audit lists issuances newest first, filtered by email', async () => {
    const user = await seedUser(db.pool, { email: 'carol@example.com' });
    const t = await signIn(idp.issuer, user.sessionToken, { scope: 'openid mcp:mail' });
    await refresh(idp.issuer, t.refresh_token);
    const r = await admin(['audit', '--email', 'Carol@Example.com', '--json']);
    expect(r.code, r.out).toBe(0);
    const rows = r.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rows.map((x) => x.grantType)).toEqual(['refresh_token', 'authorization_code']);
    expect(rows[1]).toMatchObject({
      email: 'carol@example.com',
      clientId: 'platform-cli',
      scope: 'openid mcp:mail',
      jti: decodeJwt(t.access_token).jti,
    });
    expect((await admin(['audit', '--email', 'carol@example.com'])).out).toMatch(/carol@example\.com/);
  });

  it('says clearly when an option is missing', async () => {
    const r = await admin(['revoke-user']);
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(/--email/);
  });
});
