// The admin API's door: who gets `platform:admin`, and who is let through with it. Real IdP process, real
// Postgres and Redis; every refusal here is one the API must make.

import { createPrivateKey } from 'node:crypto';
import { Redis } from 'ioredis';
import { decodeJwt, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess, testSigningKeyPem } from '../helpers/processes.ts';

let db: TestDatabase;
let idp: IdpProcess;
let admin: SeededUser;
let plain: SeededUser;
let redis: Redis;
let idpKid: string;
const ADMIN_SCOPES = 'openid email mcp:platform platform:admin';

beforeAll(async () => {
  db = await createTestDatabase();
  admin = await seedUser(db.pool);
  plain = await seedUser(db.pool);
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    // Upper case on purpose: the list is case-insensitive.
    env: { PLATFORM_ADMIN_EMAILS: `someone-else@example.com, ${admin.email.toUpperCase()}` },
  });
  redis = new Redis(inject('redisUrl'));
  const jwks = (await (await fetch(`${idp.issuer}/.well-known/jwks.json`)).json()) as {
    keys: Array<{ kid: string }>;
  };
  idpKid = jwks.keys[0]!.kid;
});

afterAll(async () => {
  redis?.disconnect();
  await idp?.stop();
  await db?.drop();
});

async function adminPost(path: string, token: string | undefined, body: unknown) {
  const res = await fetch(`${idp.issuer}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    json: (text ? JSON.parse(text) : {}) as Record<string, unknown>,
  };
}

describe('granting platform:admin', () => {
  it('is listed in discovery', async () => {
    const meta = (await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).json()) as {
      scopes_supported: string[];
    };
    expect(meta.scopes_supported).toContain('platform:admin');
  });

  it('is granted to an admin who asks, on the code exchange and on refresh', async () => {
    const t = await signIn(idp.issuer, admin.sessionToken, { scope: ADMIN_SCOPES });
    expect(t.scope.split(' ')).toContain('platform:admin');
    expect(String(decodeJwt(t.access_token).scope).split(' ')).toContain('platform:admin');
    const r = await refresh(idp.issuer, t.refresh_token);
    expect(r.status).toBe(200);
    expect(String(r.json.scope).split(' ')).toContain('platform:admin');
  });

  it('is not granted to an admin who does not ask (nor by an empty scope)', async () => {
    const t = await signIn(idp.issuer, admin.sessionToken, { scope: 'openid email mcp:platform' });
    expect(t.scope.split(' ')).not.toContain('platform:admin');
    const all = await signIn(idp.issuer, admin.sessionToken, { scope: undefined });
    expect(all.scope.split(' ')).not.toContain('platform:admin');
    expect(all.scope.split(' ')).toContain('mcp:platform');
  });

  it('is dropped, silently, for a user who is not an admin', async () => {
    const t = await signIn(idp.issuer, plain.sessionToken, { scope: ADMIN_SCOPES });
    expect(t.scope.split(' ')).not.toContain('platform:admin');
    expect(String(decodeJwt(t.access_token).scope).split(' ')).not.toContain('platform:admin');
    // Not in the stored grant either (the token endpoint drops it again, but the grant is the record).
    const { rows } = await db.pool.query('SELECT scope FROM platform.refresh_tokens WHERE email = $1', [
      plain.email,
    ]);
    for (const r of rows) expect(String(r.scope).split(' ')).not.toContain('platform:admin');
  });
});

describe('platform:admin and third-party clients', () => {
  it('is never granted to a registered client, even for an admin who asked and approved consent', async () => {
    const reg = await fetch(`${idp.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: ['http://127.0.0.1:47001/callback'],
        client_name: 'a connector',
      }),
    });
    const clientId = ((await reg.json()) as { client_id: string }).client_id;
    const params = { client_id: clientId, redirect_uri: 'http://127.0.0.1:47001/callback' };
    const t = await signIn(idp.issuer, admin.sessionToken, { ...params, scope: ADMIN_SCOPES });
    expect(t.scope.split(' ')).toContain('mcp:platform');
    expect(t.scope.split(' ')).not.toContain('platform:admin');
    // Nor later, silently, once the client has its consent.
    const silent = await signIn(idp.issuer, admin.sessionToken, {
      ...params,
      scope: 'mcp:platform platform:admin',
      prompt: 'none',
    });
    expect(silent.scope.split(' ')).not.toContain('platform:admin');
  });
});

describe('the admin API bearer check', () => {
  it('refuses a request without a token: 401 invalid_token with WWW-Authenticate', async () => {
    const r = await adminPost('/admin/api/revoke-token', undefined, { jti: 'x' });
    expect(r.status).toBe(401);
    expect(r.json.error).toBe('invalid_token');
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer/);
  });

  it('refuses a token signed by another key, or for another audience', async () => {
    const { privateKey } = await generateKeyPair('RS256');
    const forged = await new SignJWT({
      email: admin.email,
      scope: 'platform:admin',
      jti: crypto.randomUUID(),
    })
      .setProtectedHeader({ alg: 'RS256', kid: 'forged' })
      .setIssuer(idp.issuer)
      .setAudience(idp.audience)
      .setSubject(admin.sub)
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(privateKey);
    const r = await adminPost('/admin/api/revoke-token', forged, { jti: 'x' });
    expect(r.status).toBe(401);
    expect(r.json.error).toBe('invalid_token');
  });

  it('refuses an admin token without platform:admin: 403 insufficient_scope', async () => {
    const t = await signIn(idp.issuer, admin.sessionToken, { scope: 'openid email mcp:platform' });
    const r = await adminPost('/admin/api/revoke-token', t.access_token, { jti: crypto.randomUUID() });
    expect(r.status).toBe(403);
    expect(r.json.error).toBe('insufficient_scope');
  });

  it('refuses a non-admin (who asked for platform:admin and did not get it): 403', async () => {
    const t = await signIn(idp.issuer, plain.sessionToken, { scope: ADMIN_SCOPES });
    const r = await adminPost('/admin/api/revoke-user', t.access_token, { email: admin.email });
    expect(r.status).toBe(403);
    expect(r.json.error).toBe('insufficient_scope');
  });

  it('refuses a token with platform:admin whose email is not (or no longer) an admin: 403', async () => {
    // Signed with the IdP's own key, as if issued before the email left PLATFORM_ADMIN_EMAILS.
    const minted = await new SignJWT({
      email: plain.email,
      scope: 'openid platform:admin',
      azp: 'platform-cli',
      client_id: 'platform-cli',
      jti: crypto.randomUUID(),
    })
      .setProtectedHeader({ alg: 'RS256', kid: idpKid, typ: 'at+jwt' })
      .setIssuer(idp.issuer)
      .setAudience(idp.audience)
      .setSubject(plain.sub)
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(createPrivateKey(testSigningKeyPem()));
    const r = await adminPost('/admin/api/revoke-user', minted, { email: admin.email });
    expect(r.status).toBe(403);
    expect(r.json.error).toBe('insufficient_scope');
    expect(r.json.error_description).toMatch(/not an administrator/);
  });

  it('refuses an admin token once it is revoked (401), and writes no audit row for refusals', async () => {
    const t = await signIn(idp.issuer, admin.sessionToken, { scope: ADMIN_SCOPES });
    const jti = decodeJwt(t.access_token).jti as string;
    const other = await signIn(idp.issuer, admin.sessionToken, { scope: ADMIN_SCOPES });
    // One admin token revokes the other through the API itself.
    const done = await adminPost('/admin/api/revoke-token', other.access_token, { jti });
    expect(done.status).toBe(200);
    const r = await adminPost('/admin/api/revoke-token', t.access_token, { jti: crypto.randomUUID() });
    expect(r.status).toBe(401);
    expect(r.json.error).toBe('invalid_token');
    expect(r.json.error_description).toMatch(/revoked/);
    const { rows } = await db.pool.query(
      "SELECT count(*)::int AS n FROM platform.admin_audit WHERE action = 'revoke-token' AND target = $1",
      [jti],
    );
    expect(rows[0].n).toBe(1);
  });

  it('answers 404 not_found for an unknown admin route and 405 for a wrong method, only after auth', async () => {
    const t = await signIn(idp.issuer, admin.sessionToken, { scope: ADMIN_SCOPES });
    const unknown = await fetch(`${idp.issuer}/admin/api/nothing-here`, {
      headers: { authorization: `Bearer ${t.access_token}` },
    });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: string }).error).toBe('not_found');
    const wrong = await fetch(`${idp.issuer}/admin/api/revoke-token`, {
      headers: { authorization: `Bearer ${t.access_token}` },
    });
    expect(wrong.status).toBe(405);
    const anonymous = await fetch(`${idp.issuer}/admin/api/nothing-here`);
    expect(anonymous.status).toBe(401);
  });

  it('answers 400 invalid_request for a bad body', async () => {
    const t = await signIn(idp.issuer, admin.sessionToken, { scope: ADMIN_SCOPES });
    for (const body of ['not json', '[]', { jti: '' }, { jti: 'has space' }, { jti: 42 }]) {
      const r = await adminPost('/admin/api/revoke-token', t.access_token, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error).toBe('invalid_request');
    }
    for (const body of [{}, { email: 'no-at-sign' }, { email: ['a@b'] }]) {
      const r = await adminPost('/admin/api/revoke-user', t.access_token, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error).toBe('invalid_request');
    }
  });
});

describe('POST /admin/api/revoke-token', () => {
  it('lowercases the jti, says whether it was issued here, denies it until exp, and audits it', async () => {
    const adminToken = (await signIn(idp.issuer, admin.sessionToken, { scope: ADMIN_SCOPES })).access_token;
    const victim = await signIn(idp.issuer, plain.sessionToken);
    const claims = decodeJwt(victim.access_token);
    const jti = claims.jti as string;
    const r = await adminPost('/admin/api/revoke-token', adminToken, { jti: jti.toUpperCase() });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      jti,
      known: true,
      revoked: true,
      expires_at: new Date((claims.exp as number) * 1000).toISOString(),
      published: true,
    });
    expect(await redis.get(`platform:deny:jti:${jti}`)).toBe('1');
    const { rows } = await db.pool.query(
      'SELECT actor_email, actor_sub, action, target, detail FROM platform.admin_audit WHERE target = $1',
      [jti],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ actor_email: admin.email, actor_sub: admin.sub, action: 'revoke-token' });
    expect(rows[0].detail).toMatchObject({ known: true });
  });

  it('reports a jti issued nowhere here as known: false, and still denies it for 24 h (an Entra uti)', async () => {
    const adminToken = (await signIn(idp.issuer, admin.sessionToken, { scope: ADMIN_SCOPES })).access_token;
    const uti = `Uti-${crypto.randomUUID().slice(0, 12)}`;
    const r = await adminPost('/admin/api/revoke-token', adminToken, { jti: uti });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ jti: uti.toLowerCase(), known: false, revoked: true });
    const ttl = await redis.ttl(`platform:deny:jti:${uti.toLowerCase()}`);
    expect(ttl).toBeGreaterThan(24 * 3600 - 60);
  });
});

describe('the admin audit table', () => {
  it('is append-only', async () => {
    await expect(db.pool.query('DELETE FROM platform.admin_audit')).rejects.toThrow(/append-only/);
    await expect(db.pool.query("UPDATE platform.admin_audit SET action = 'x'")).rejects.toThrow(
      /append-only/,
    );
  });
});
