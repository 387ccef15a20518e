// Dynamic registration (RFC 7591) and revocation (RFC 7009), including the Redis side of revocation.

import { Redis } from 'ioredis';
import { decodeJwt, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { postForm, refresh, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const CONNECTOR = 'https://claude.ai/api/mcp/auth_callback';
let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;
let redis: Redis;

beforeAll(async () => {
  db = await createTestDatabase();
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_ALLOWED_REDIRECT_URIS: `${CONNECTOR},https://connector.example/cb` },
  });
  user = await seedUser(db.pool);
  redis = new Redis(inject('redisUrl'));
});

afterAll(async () => {
  redis?.disconnect();
  await idp?.stop();
  await db?.drop();
});

async function register(body: unknown, contentType = 'application/json') {
  const res = await fetch(`${idp.issuer}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': contentType },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown>, res };
}

describe('POST /oauth/register', () => {
  it('registers loopback callbacks (native) and allowlisted connector callbacks (web) as public clients', async () => {
    const web = await register({
      application_type: 'web',
      redirect_uris: [CONNECTOR],
      client_name: 'Connector',
    });
    expect(web.status).toBe(201);
    expect(web.json.application_type).toBe('web');
    const r = await register({
      redirect_uris: [
        'http://127.0.0.1:8976/callback',
        'http://localhost:1234/callback',
        'http://[::1]:9/cb',
      ],
      client_name: 'Assistant connector',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      scope: 'openid mcp:mail',
      logo_uri: 'https://ignored.example/logo.png',
    });
    expect(r.status).toBe(201);
    expect(r.json.client_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.json.token_endpoint_auth_method).toBe('none');
    expect(r.json.application_type).toBe('native');
    expect(r.json.redirect_uris).toEqual([
      'http://127.0.0.1:8976/callback',
      'http://localhost:1234/callback',
      'http://[::1]:9/cb',
    ]);
    expect(r.json.client_secret).toBeUndefined();
    const { rows } = await db.pool.query(
      'SELECT type, redirect_uris FROM platform.oauth_clients WHERE client_id = $1',
      [r.json.client_id],
    );
    expect(rows[0].type).toBe('public');
    expect(JSON.parse(rows[0].redirect_uris)).toHaveLength(3);
  });

  const refused: Array<[string, unknown, string]> = [
    [
      'a foreign https callback',
      { redirect_uris: ['https://evil.example/callback'] },
      'invalid_redirect_uri',
    ],
    [
      'a loopback with a fragment',
      { redirect_uris: ['http://127.0.0.1:5000/callback#x'] },
      'invalid_redirect_uri',
    ],
    [
      'a private-network host',
      { redirect_uris: ['http://192.168.1.10:5000/callback'] },
      'invalid_redirect_uri',
    ],
    ['a custom scheme', { redirect_uris: ['myapp://callback'] }, 'invalid_redirect_uri'],
    ['javascript:', { redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
    [
      'an allowlisted URI with a suffix',
      { application_type: 'web', redirect_uris: [`${CONNECTOR}/x`] },
      'invalid_redirect_uri',
    ],
    [
      'one bad among good',
      { redirect_uris: ['http://127.0.0.1:1/callback', 'https://evil.example/cb'] },
      'invalid_redirect_uri',
    ],
    ['no redirect_uris', { client_name: 'x' }, 'invalid_redirect_uri'],
    ['empty redirect_uris', { redirect_uris: [] }, 'invalid_redirect_uri'],
    ['a non-string URI', { redirect_uris: [42] }, 'invalid_redirect_uri'],
    [
      'an authentication method the provider does not offer',
      { redirect_uris: ['http://127.0.0.1:1/callback'], token_endpoint_auth_method: 'tls_client_auth' },
      'invalid_client_metadata',
    ],
    [
      'the implicit grant',
      { redirect_uris: ['http://127.0.0.1:1/callback'], grant_types: ['implicit'] },
      'invalid_client_metadata',
    ],
    [
      'response_type token',
      { redirect_uris: ['http://127.0.0.1:1/callback'], response_types: ['token'] },
      'invalid_client_metadata',
    ],
    ['a JSON array body', [], 'invalid_client_metadata'],
    ['a JSON string body', '"x"', 'invalid_client_metadata'],
  ];
  for (const [name, body, error] of refused) {
    it(`refuses ${name} with ${error}`, async () => {
      const r = await register(body);
      expect(r.status).toBe(400);
      expect(r.json.error).toBe(error);
      expect(typeof r.json.error_description).toBe('string');
    });
  }

  it('refuses malformed JSON, the wrong media type and oversized bodies without a 500', async () => {
    expect((await register('{"redirect_uris": [')).status).toBe(400);
    expect((await register('redirect_uris=x', 'application/x-www-form-urlencoded')).status).toBe(400);
    const big = await register({ redirect_uris: ['http://127.0.0.1:1/callback'], pad: 'x'.repeat(100_000) });
    expect(big.status).toBe(413);
    expect(big.json.error).toBe('invalid_request');
  });

  it('platform-cli is pre-registered', async () => {
    const { rows } = await db.pool.query(
      `SELECT type FROM platform.oauth_clients WHERE client_id = 'platform-cli'`,
    );
    expect(rows[0].type).toBe('public');
  });
});

describe('POST /oauth/revoke', () => {
  const revoke = (form: Record<string, string | undefined>) => postForm(`${idp.issuer}/oauth/revoke`, form);

  it('revokes a refresh token: revokedAt set, later refresh invalid_grant, its access tokens denied', async () => {
    const t = await signIn(idp.issuer, user.sessionToken);
    const r = await revoke({
      token: t.refresh_token,
      token_type_hint: 'refresh_token',
      client_id: 'platform-cli',
    });
    expect(r.status).toBe(200);
    const { rows } = await db.pool.query(
      'SELECT count(*)::int AS n FROM platform.refresh_tokens WHERE revoked_at IS NOT NULL AND email = $1',
      [user.email],
    );
    expect(rows[0].n).toBeGreaterThanOrEqual(1);
    expect((await refresh(idp.issuer, t.refresh_token)).json.error).toBe('invalid_grant');
    // The sign-in's live access tokens are denied with it (RFC 7009 §2.1; the third phase's "revocation wins
    // every race" overrides the first spec's "access tokens stay valid until exp").
    expect(await redis.exists(`platform:deny:jti:${decodeJwt(t.access_token).jti}`)).toBe(1);
  });

  it('puts a revoked access token on the jti denylist with a TTL until exp, and publishes it', async () => {
    const t = await signIn(idp.issuer, user.sessionToken);
    const jti = decodeJwt(t.access_token).jti as string;
    const sub = new Redis(inject('redisUrl'));
    const seen: string[] = [];
    await sub.subscribe('platform:revocations');
    sub.on('message', (_c, m) => seen.push(m));
    try {
      expect((await revoke({ token: t.access_token })).status).toBe(200);
      expect(await redis.get(`platform:deny:jti:${jti}`)).toBe('1');
      const ttl = await redis.ttl(`platform:deny:jti:${jti}`);
      expect(ttl).toBeGreaterThan(3590);
      await expect.poll(() => seen).toContainEqual(JSON.stringify({ jti }));
    } finally {
      sub.disconnect();
    }
  });

  it('answers 200 for unknown tokens and never denies a jti from a token it did not sign', async () => {
    const { privateKey } = await generateKeyPair('RS256');
    const forged = await new SignJWT({ jti: 'forged-jti-123', sub: 'x', aud: idp.audience })
      .setProtectedHeader({ alg: 'RS256', kid: 'whatever' })
      .setIssuer(idp.issuer)
      .setExpirationTime('1h')
      .sign(privateKey);
    expect((await revoke({ token: forged })).status).toBe(200);
    expect(await redis.exists('platform:deny:jti:forged-jti-123')).toBe(0);
    expect((await revoke({ token: 'unknown-refresh-token' })).status).toBe(200);
  });

  it('refuses a request without a token, with an unknown hint, or as JSON', async () => {
    expect((await revoke({})).json.error).toBe('invalid_request');
    expect((await revoke({ token: 'x', token_type_hint: 'id_token' })).json.error).toBe(
      'unsupported_token_type',
    );
    const res = await fetch(`${idp.issuer}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"token":"x"}',
    });
    expect(res.status).toBe(400);
  });
});

describe('userinfo', () => {
  it('answers sub and email for a platform token, 401 invalid_token otherwise', async () => {
    const t = await signIn(idp.issuer, user.sessionToken);
    const ok = await fetch(`${idp.issuer}/oauth/userinfo`, {
      headers: { authorization: `Bearer ${t.access_token}` },
    });
    expect(await ok.json()).toEqual({ sub: user.sub, email: user.email });
    for (const auth of [undefined, 'Bearer x.y.z', `Basic ${t.access_token}`, `Bearer ${t.access_token}x`]) {
      const res = await fetch(`${idp.issuer}/oauth/userinfo`, {
        headers: auth ? { authorization: auth } : {},
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/invalid_token/);
    }
  });
});
