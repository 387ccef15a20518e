// Revocation rules at the IdP: what revoke-user reaches (codes, refresh families, cut-offs), the case of a jti,
// userinfo refusing revoked tokens, the refresh grant re-reading the user, /oauth/revoke and other clients'
// tokens. Real IdP process, Postgres and Redis.

import { Redis } from 'ioredis';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { exchangeCode, obtainCode, postForm, refresh, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

let db: TestDatabase;
let idp: IdpProcess;
let admin: SeededUser;
let redis: Redis;
let adminToken: string;
let otherClient: { clientId: string; redirectUri: string };

beforeAll(async () => {
  db = await createTestDatabase();
  admin = await seedUser(db.pool);
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_ADMIN_EMAILS: admin.email },
  });
  redis = new Redis(inject('redisUrl'));
  adminToken = (await signIn(idp.issuer, admin.sessionToken, { scope: 'openid email platform:admin' }))
    .access_token;
  const redirectUri = 'http://127.0.0.1:41234/callback';
  const reg = await fetch(`${idp.issuer}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ redirect_uris: [redirectUri], client_name: 'another client' }),
  });
  otherClient = { clientId: ((await reg.json()) as { client_id: string }).client_id, redirectUri };
});

afterAll(async () => {
  redis?.disconnect();
  await idp?.stop();
  await db?.drop();
});

async function adminPost(path: string, body: unknown) {
  const res = await fetch(`${idp.issuer}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${adminToken}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** userinfo with the token in the header; the same token in a POST body (RFC 6750 §2.2) must get the same answer. */
async function userinfo(token: string) {
  const res = await fetch(`${idp.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${token}` } });
  const inBody = await fetch(`${idp.issuer}/oauth/userinfo`, {
    method: 'POST',
    body: new URLSearchParams({ access_token: token }),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  const answer = { status: res.status, json: (await res.json()) as Record<string, unknown> };
  expect({ status: inBody.status, json: await inBody.json() }, 'the token in a POST body').toEqual(answer);
  return answer;
}

const nextSecond = () => new Promise((r) => setTimeout(r, 1100 - (Date.now() % 1000)));

describe('revoke-user', () => {
  it('writes the subject and email cut-offs, revokes refresh families, consumes outstanding codes', async () => {
    const user = await seedUser(db.pool);
    const a = await signIn(idp.issuer, user.sessionToken);
    const b = await signIn(idp.issuer, user.sessionToken);
    // A code issued before the revocation and redeemed after it.
    const pending = await obtainCode({ issuer: idp.issuer, sessionToken: user.sessionToken });
    const r = await adminPost('/admin/api/revoke-user', { email: user.email.toUpperCase() });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ email: user.email, subjects: [user.sub], refresh_families: 2, codes: 1 });
    const cutoff = r.json.cutoff as number;
    expect(Math.abs(cutoff - Date.now() / 1000)).toBeLessThan(5);

    expect(await redis.get(`platform:deny:sub:${user.sub}`)).toBe(String(cutoff));
    expect(await redis.get(`platform:deny:email:${user.email}`)).toBe(String(cutoff));
    expect(await redis.ttl(`platform:deny:email:${user.email}`)).toBeGreaterThan(3500);

    const redeemed = await exchangeCode(idp.issuer, pending);
    expect(redeemed.status).toBe(400);
    expect(redeemed.json.error).toBe('invalid_grant');
    for (const t of [a, b])
      expect((await refresh(idp.issuer, t.refresh_token)).json.error).toBe('invalid_grant');
    for (const t of [a, b]) {
      const u = await userinfo(t.access_token);
      expect(u.status).toBe(401);
      expect(u.json.error).toBe('invalid_token');
    }
    // A sign-in after the cut-off works again.
    await nextSecond();
    const fresh = await signIn(idp.issuer, user.sessionToken);
    expect((await userinfo(fresh.access_token)).status).toBe(200);
  });

  it('writes the email cut-off for an email the IdP never issued to (tokens of other issuers)', async () => {
    const email = `entra-only-${crypto.randomUUID().slice(0, 8)}@example.com`;
    const r = await adminPost('/admin/api/revoke-user', { email });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ email, subjects: [], refresh_families: 0, codes: 0 });
    expect(await redis.get(`platform:deny:email:${email}`)).toBe(String(r.json.cutoff));
  });

  it('publishes the cut-offs on platform:revocations', async () => {
    const user = await seedUser(db.pool);
    await signIn(idp.issuer, user.sessionToken);
    const sub = new Redis(inject('redisUrl'));
    const seen: string[] = [];
    await sub.subscribe('platform:revocations');
    sub.on('message', (_c, m) => seen.push(m));
    try {
      const r = await adminPost('/admin/api/revoke-user', { email: user.email });
      const cutoff = r.json.cutoff;
      await expect.poll(() => seen).toContainEqual(JSON.stringify({ email: user.email, cutoff }));
      await expect.poll(() => seen).toContainEqual(JSON.stringify({ sub: user.sub, cutoff }));
    } finally {
      sub.disconnect();
    }
  });
});

describe('jti case', () => {
  it('an upper-cased jti revokes the token: denylist key lowercased, userinfo refuses it', async () => {
    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken);
    const jti = decodeJwt(t.access_token).jti as string;
    const r = await adminPost('/admin/api/revoke-token', { jti: jti.toUpperCase() });
    expect(r.json).toMatchObject({ jti, known: true });
    expect(await redis.get(`platform:deny:jti:${jti}`)).toBe('1');
    expect(await redis.exists(`platform:deny:jti:${jti.toUpperCase()}`)).toBe(0);
    expect((await userinfo(t.access_token)).status).toBe(401);
  });
});

describe('userinfo', () => {
  it('refuses a token revoked through /oauth/revoke, and answers its sibling', async () => {
    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken);
    const sibling = await signIn(idp.issuer, user.sessionToken);
    expect((await userinfo(t.access_token)).status).toBe(200);
    expect((await postForm(`${idp.issuer}/oauth/revoke`, { token: t.access_token })).status).toBe(200);
    const u = await userinfo(t.access_token);
    expect(u.status).toBe(401);
    expect(u.json).toMatchObject({ error: 'invalid_token' });
    expect((await userinfo(sibling.access_token)).json).toEqual({ sub: user.sub, email: user.email });
  });
});

describe('the refresh grant re-reads the user', () => {
  it('a renamed user: the new access token (and the next refresh) carries the new email', async () => {
    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken);
    const renamed = `renamed-${crypto.randomUUID().slice(0, 8)}@Example.com`;
    await db.pool.query('UPDATE users SET email = $1 WHERE id = $2', [renamed, user.id]);
    const r = await refresh(idp.issuer, t.refresh_token);
    expect(r.status).toBe(200);
    expect(decodeJwt(r.json.access_token as string).email).toBe(renamed.toLowerCase());
    expect((await userinfo(r.json.access_token as string)).json.email).toBe(renamed.toLowerCase());
    const again = await refresh(idp.issuer, r.json.refresh_token as string);
    expect(decodeJwt(again.json.access_token as string).email).toBe(renamed.toLowerCase());
    const { rows } = await db.pool.query(
      "SELECT email FROM platform.issuance_audit WHERE subject = $1 AND grant_type = 'refresh_token'",
      [user.sub],
    );
    expect(rows.map((x) => x.email)).toEqual([renamed.toLowerCase(), renamed.toLowerCase()]);
  });

  it('a deleted user: invalid_grant', async () => {
    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken);
    await db.pool.query('DELETE FROM users WHERE id = $1', [user.id]);
    const r = await refresh(idp.issuer, t.refresh_token);
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('invalid_grant');
  });
});

describe('/oauth/revoke and other clients', () => {
  it("refuses another client's access token with unauthorized_client and leaves it valid", async () => {
    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken);
    const jti = decodeJwt(t.access_token).jti as string;
    const r = await postForm(`${idp.issuer}/oauth/revoke`, {
      token: t.access_token,
      client_id: otherClient.clientId,
    });
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('unauthorized_client');
    expect(await redis.exists(`platform:deny:jti:${jti}`)).toBe(0);
    expect((await userinfo(t.access_token)).status).toBe(200);
  });

  it("refuses another client's refresh token and leaves its family alive", async () => {
    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken);
    const r = await postForm(`${idp.issuer}/oauth/revoke`, {
      token: t.refresh_token,
      token_type_hint: 'refresh_token',
      client_id: otherClient.clientId,
    });
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('unauthorized_client');
    expect((await refresh(idp.issuer, t.refresh_token)).status).toBe(200);
  });

  it('revokes the client its own tokens', async () => {
    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken, {
      client_id: otherClient.clientId,
      redirect_uri: otherClient.redirectUri,
    });
    const r = await postForm(`${idp.issuer}/oauth/revoke`, {
      token: t.refresh_token,
      client_id: otherClient.clientId,
    });
    expect(r.status).toBe(200);
    expect((await refresh(idp.issuer, t.refresh_token, otherClient.clientId)).json.error).toBe(
      'invalid_grant',
    );
  });
});

describe('durable record', () => {
  it('every revocation is a row in platform.revocations with its expiry', async () => {
    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken);
    const claims = decodeJwt(t.access_token);
    await postForm(`${idp.issuer}/oauth/revoke`, { token: t.access_token });
    const { rows } = await db.pool.query(
      "SELECT known, extract(epoch FROM expires_at)::bigint AS exp, revoked_by FROM platform.revocations WHERE kind = 'jti' AND value = $1",
      [claims.jti],
    );
    expect(rows).toEqual([{ known: true, exp: String(claims.exp), revoked_by: 'client:platform-cli' }]);
  });
});
