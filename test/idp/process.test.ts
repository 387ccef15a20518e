// The provider as a process: configuration fails fast with one line, SIGTERM exits 0, bad input never
// produces a 500, and no secret ever reaches a log line.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, seedUser, type TestDatabase } from '../helpers/database.ts';
import { exchangeCode, obtainCode, refresh } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess, startPlatform, testSigningKeyPem } from '../helpers/processes.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const validEnv = () => ({
  IDP_PORT: '0',
  PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
  PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
  PLATFORM_AUDIENCE: 'aud',
  DATABASE_URL: db.url,
  REDIS_URL: inject('redisUrl'),
});

describe('configuration is validated before listening', () => {
  const cases: Array<[string, Record<string, string | undefined>, RegExp]> = [
    ['DATABASE_URL missing', { DATABASE_URL: undefined }, /DATABASE_URL: is required/],
    [
      'DATABASE_URL sqlite',
      { DATABASE_URL: 'sqlite:///data/app.db' },
      /DATABASE_URL: must begin with postgresql:\/\//,
    ],
    ['DATABASE_URL a file path', { DATABASE_URL: './app.db' }, /DATABASE_URL/],
    ['PLATFORM_AUDIENCE missing', { PLATFORM_AUDIENCE: undefined }, /PLATFORM_AUDIENCE: is required/],
    ['IDP_PORT not a number', { IDP_PORT: 'eighty' }, /IDP_PORT: must be a port number/],
    [
      'issuer not a URL',
      { PLATFORM_OIDC_ISSUER: 'idp.example' },
      /PLATFORM_OIDC_ISSUER: must be an absolute/,
    ],
    ['issuer missing', { PLATFORM_OIDC_ISSUER: undefined }, /PLATFORM_OIDC_ISSUER: is required/],
    ['REDIS_URL missing', { REDIS_URL: undefined }, /REDIS_URL: is required/],
    ['REDIS_URL wrong scheme', { REDIS_URL: 'http://x' }, /REDIS_URL: must begin with redis:\/\//],
    ['key unreadable', { PLATFORM_OIDC_PRIVATE_KEY: 'xyz' }, /PLATFORM_OIDC_PRIVATE_KEY: .*neither a PEM/],
    ['service name invalid', { PLATFORM_SERVICES: 'mail,Bad Name' }, /PLATFORM_SERVICES: "Bad Name"/],
    [
      'session cookie not a cookie name',
      { PLATFORM_SESSION_COOKIE: 'a b;c' },
      /PLATFORM_SESSION_COOKIE: "a b;c" is not a cookie name/,
    ],
    [
      'an empty Auth.js secret in the rotation list',
      { PLATFORM_AUTHJS_SECRET: 'one-secret-value-0123456789,,older' },
      /PLATFORM_AUTHJS_SECRET: names an empty secret/,
    ],
    [
      'refresh retry window under 30 s',
      { PLATFORM_REFRESH_RETRY_SECONDS: '10' },
      /PLATFORM_REFRESH_RETRY_SECONDS: must be between 30 and 3600, got 10/,
    ],
    [
      'refresh retry window not a number',
      { PLATFORM_REFRESH_RETRY_SECONDS: '1m' },
      /PLATFORM_REFRESH_RETRY_SECONDS: must be a whole number, got "1m"/,
    ],
  ];
  for (const [name, override, message] of cases) {
    it(`${name} → one line naming the variable, non-zero exit`, async () => {
      const p = startPlatform(['idp'], { ...validEnv(), ...override });
      const code = await p.exited;
      expect(code).not.toBe(0);
      const out = p.output().trim();
      expect(out).toMatch(message);
      expect(out.split('\n')).toHaveLength(1);
      expect(out).not.toMatch(/idp listening/);
    });
  }
});

describe('a running provider', () => {
  let idp: IdpProcess;
  beforeAll(async () => {
    idp = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl') });
  });
  afterAll(async () => {
    await idp?.stop();
  });

  it('never answers hostile input with a 5xx (revoke answers 200 to unknown tokens, as RFC 7009 says)', async () => {
    const u = idp.issuer;
    const post =
      (type: string) =>
      (path: string, body: string): [string, RequestInit] => [
        path,
        { method: 'POST', body, headers: { 'content-type': type } },
      ];
    const form = post('application/x-www-form-urlencoded');
    const json = post('application/json');
    const attempts: Array<[string, RequestInit]> = [
      form('/oauth/token', 'grant_type=%zz'),
      form('/oauth/token', 'a'.repeat(200_000)),
      json('/oauth/token', '{"grant_type":"authorization_code"}'),
      form('/oauth/token', 'grant_type=refresh_token&grant_type=authorization_code'),
      ['/oauth/token', { method: 'POST' }],
      ['/oauth/token', { method: 'GET' }],
      form('/oauth/token', '\u0000\u0001\u0002'),
      form('/oauth/token', 'grant_type=authorization_code&client_id=%00&code=x'),
      json('/oauth/register', '{"redirect_uris":{"a":1}}'),
      json('/oauth/register', 'null'),
      json('/oauth/register', '[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]'),
      form('/oauth/revoke', 'token=a.b.c'),
      form('/oauth/revoke', 'token=eyJhbGciOiJub25lIn0.eyJqdGkiOiJ4In0.'),
      [
        '/oauth/authorize?client_id=platform-cli&redirect_uri=http://127.0.0.1:1/callback&response_type=code&scope=%ff',
        { method: 'GET', redirect: 'manual' },
      ],
      ['/oauth/authorize?%', { method: 'GET', redirect: 'manual' }],
      ['/oauth/userinfo', { method: 'GET', headers: { authorization: 'Bearer ....' } }],
      ['/nope', { method: 'GET' }],
      ['/.well-known/jwks.json', { method: 'DELETE' }],
    ];
    for (const [path, init] of attempts) {
      const res = await fetch(`${u}${path}`, init);
      expect(res.status, `${init.method} ${path}`).toBeLessThan(500);
      const body = await res.text();
      if (res.headers.get('content-type')?.startsWith('application/json')) {
        expect(JSON.parse(body)).toHaveProperty('error');
      }
    }
  });

  it('answers 413 for a body over the limit, 405 with Allow for a wrong method, 404 for unknown routes', async () => {
    const big = await fetch(`${idp.issuer}/oauth/token`, {
      method: 'POST',
      body: 'x'.repeat(70_000),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(big.status).toBe(413);
    const wrong = await fetch(`${idp.issuer}/oauth/token`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expect((await fetch(`${idp.issuer}/admin`)).status).toBe(404);
  });

  it('never logs a token, code, verifier, session cookie or key', async () => {
    const user = await seedUser(db.pool);
    const c = await obtainCode({ issuer: idp.issuer, sessionToken: user.sessionToken });
    const t = await exchangeCode(idp.issuer, c);
    const r = await refresh(idp.issuer, t.json.refresh_token as string);
    await refresh(idp.issuer, t.json.refresh_token as string); // retry path logs too
    await fetch(`${idp.issuer}/oauth/userinfo`, {
      headers: { authorization: `Bearer ${r.json.access_token}` },
    });
    await fetch(`${idp.issuer}/oauth/revoke`, {
      method: 'POST',
      body: new URLSearchParams({ token: r.json.access_token as string }),
    });
    await new Promise((res) => setTimeout(res, 200));
    const out = idp.output();
    expect(out).toMatch(/"path":"\/oauth\/token"/);
    const secrets = [
      c.code,
      c.verifier,
      user.sessionToken,
      t.json.access_token,
      t.json.refresh_token,
      t.json.id_token,
      r.json.access_token,
      r.json.refresh_token,
    ] as string[];
    for (const s of secrets) {
      expect(out.includes(s)).toBe(false);
      expect(out.includes(s.slice(0, 24))).toBe(false);
    }
    expect(out).not.toMatch(/PRIVATE KEY/);
    for (const line of idp.logs().filter((l) => 'path' in l)) expect(line).toHaveProperty('reqId');
  });

  it('exits 0 on SIGTERM', async () => {
    const p = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl') });
    expect(await p.stop('SIGTERM')).toBe(0);
    expect(p.output()).toMatch(/shutting down/);
  });
});
