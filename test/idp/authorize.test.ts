// GET /oauth/authorize: each rule that says "only", "never", "mandatory" or "required", tried and broken.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { authorizeRequest, LOOPBACK } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;

beforeAll(async () => {
  db = await createTestDatabase();
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: { PUBLIC_BASE_URL: 'https://platform.example.com' },
  });
  user = await seedUser(db.pool);
});

afterAll(async () => {
  await idp?.stop();
  await db?.drop();
});

const issuer = () => idp.issuer;

describe('authorize with a web session', () => {
  it('redirects to the registered loopback URI with code, state and iss', async () => {
    const r = await authorizeRequest({ issuer: issuer(), sessionToken: user.sessionToken });
    expect(r.status).toBe(302);
    expect(`${r.location!.origin}${r.location!.pathname}`).toBe(LOOPBACK);
    expect(r.location!.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(r.location!.searchParams.get('state')).toBe(r.params.state);
    expect(r.location!.searchParams.get('iss')).toBe(issuer());
    expect(r.res.headers.get('cache-control')).toBe('no-store');
  });

  it('accepts the loopback client on any port', async () => {
    const r = await authorizeRequest({
      issuer: issuer(),
      sessionToken: user.sessionToken,
      params: { redirect_uri: 'http://127.0.0.1:61001/callback' },
    });
    expect(r.status).toBe(302);
    expect(r.location!.port).toBe('61001');
    expect(r.location!.searchParams.get('code')).toBeTruthy();
  });

  it('stores only a hash of the code', async () => {
    const r = await authorizeRequest({ issuer: issuer(), sessionToken: user.sessionToken });
    const code = r.location!.searchParams.get('code')!;
    const { rows } = await db.pool.query('SELECT code FROM platform.oauth_codes');
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.map((x) => x.code)).not.toContain(code);
  });

  it('grants only supported, entitled scopes, in canonical order, and defaults to all of them', async () => {
    const all = await authorizeRequest({
      issuer: issuer(),
      sessionToken: user.sessionToken,
      params: { scope: undefined },
    });
    expect(all.status).toBe(302);
    const bad = await authorizeRequest({
      issuer: issuer(),
      sessionToken: user.sessionToken,
      params: { scope: 'openid mcp:payroll' },
    });
    // An unknown scope is dropped, never invalid_scope (issue 18: clients ask for other servers' scopes).
    expect(bad.location!.searchParams.get('error')).toBeNull();
    expect(bad.location!.searchParams.get('code')).toBeTruthy();
  });
});

describe('authorize without a session', () => {
  it('sends the browser to the login URL with the original request as callbackUrl', async () => {
    const r = await authorizeRequest({ issuer: issuer() });
    expect(r.status).toBe(302);
    expect(`${r.location!.origin}${r.location!.pathname}`).toBe(`${issuer()}/api/auth/signin`);
    const back = new URL(r.location!.searchParams.get('callbackUrl')!);
    expect(back.pathname).toBe('/oauth/authorize');
    expect(back.searchParams.get('state')).toBe(r.params.state);
    expect(back.searchParams.get('code_challenge')).toBe(r.params.code_challenge);
  });

  it('treats an expired or unknown session as no session', async () => {
    const expired = await seedUser(db.pool, { sessionTtlSeconds: -10 });
    for (const token of [expired.sessionToken, 'not-a-session', 'x'.repeat(5000)]) {
      const r = await authorizeRequest({ issuer: issuer(), sessionToken: token });
      expect(r.status).toBe(302);
      expect(r.location!.pathname).toBe('/api/auth/signin');
    }
  });

  it('answers prompt=none with login_required at the client, carrying state and iss', async () => {
    const r = await authorizeRequest({ issuer: issuer(), params: { prompt: 'none' } });
    expect(r.status).toBe(302);
    expect(`${r.location!.origin}${r.location!.pathname}`).toBe(LOOPBACK);
    expect(r.location!.searchParams.get('error')).toBe('login_required');
    expect(r.location!.searchParams.get('state')).toBe(r.params.state);
    expect(r.location!.searchParams.get('iss')).toBe(issuer());
  });

  it('uses the Entra object id as sub, else the user id', async () => {
    const noEntra = await seedUser(db.pool, { entraOid: null });
    expect(noEntra.sub).toBe(String(noEntra.id));
  });
});

describe('never an open redirect: client_id and redirect_uri are checked before anything is redirected', () => {
  const cases: Array<[string, Record<string, string | undefined>]> = [
    ['missing client_id', { client_id: undefined }],
    ['unknown client_id', { client_id: 'nobody' }],
    ['missing redirect_uri', { redirect_uri: undefined }],
    ['foreign redirect_uri', { redirect_uri: 'https://evil.example/callback' }],
    ['loopback on another path', { redirect_uri: 'http://127.0.0.1:5000/steal' }],
    ['loopback with a query', { redirect_uri: 'http://127.0.0.1:5000/callback?x=1' }],
    ['https loopback', { redirect_uri: 'https://127.0.0.1:5000/callback' }],
    ['userinfo trick', { redirect_uri: 'http://127.0.0.1:5000@evil.example/callback' }],
    ['missing client_id and bad response_type', { client_id: undefined, response_type: 'token' }],
  ];
  for (const [name, params] of cases) {
    it(`${name} → plain 400 page, no Location`, async () => {
      const r = await authorizeRequest({ issuer: issuer(), sessionToken: user.sessionToken, params });
      expect(r.status).toBe(400);
      expect(r.location).toBeUndefined();
      expect(r.res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(r.body).toMatch(/Authorization request refused/);
    });
  }

  it('a malformed query string is a 400 page, not a 500', async () => {
    const res = await fetch(`${issuer()}/oauth/authorize?client_id=%E0%A4%A&redirect_uri=%zz`, {
      redirect: 'manual',
    });
    expect(res.status).toBe(400);
  });

  it('a repeated parameter is refused', async () => {
    const r = await authorizeRequest({ issuer: issuer(), sessionToken: user.sessionToken });
    const u = new URL(
      `${issuer()}/oauth/authorize?${new URLSearchParams(r.params as Record<string, string>)}&client_id=platform-cli`,
    );
    const res = await fetch(u, {
      redirect: 'manual',
      headers: { cookie: `authjs.session-token=${user.sessionToken}` },
    });
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
  });
});

describe('errors returned to a trusted redirect_uri', () => {
  const cases: Array<[string, Record<string, string | undefined>, string]> = [
    ['PKCE missing', { code_challenge: undefined, code_challenge_method: undefined }, 'invalid_request'],
    ['PKCE plain', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['PKCE method missing', { code_challenge_method: undefined }, 'invalid_request'],
    ['challenge not an S256 digest', { code_challenge: 'short' }, 'invalid_request'],
    ['state missing for platform-cli', { state: undefined }, 'invalid_request'],
    ['response_type token', { response_type: 'token' }, 'unsupported_response_type'],
    ['response_type missing', { response_type: undefined }, 'invalid_request'],
    ['resource of another origin', { resource: 'https://evil.example/mail/mcp' }, 'invalid_target'],
    [
      'resource of an unknown service',
      { resource: 'https://platform.example.com/payroll/mcp' },
      'invalid_target',
    ],
    ['resource not a URI', { resource: 'mail' }, 'invalid_target'],
    ['request object', { request: 'eyJhbGciOiJub25lIn0.e30.' }, 'request_not_supported'],
    ['response_mode fragment', { response_mode: 'fragment' }, 'invalid_request'],
  ];
  for (const [name, params, error] of cases) {
    it(`${name} → ${error}`, async () => {
      const r = await authorizeRequest({ issuer: issuer(), sessionToken: user.sessionToken, params });
      expect(r.status).toBe(302);
      expect(`${r.location!.origin}${r.location!.pathname}`).toBe(LOOPBACK);
      expect(r.location!.searchParams.get('error')).toBe(error);
      expect(r.location!.searchParams.get('error_description')).toBeTruthy();
      expect(r.location!.searchParams.get('code')).toBeNull();
      expect(r.location!.searchParams.get('iss')).toBe(issuer());
    });
  }

  it('accepts a resource naming a configured service or the platform audience', async () => {
    for (const resource of ['https://platform.example.com/mail/mcp', idp.audience]) {
      const r = await authorizeRequest({
        issuer: issuer(),
        sessionToken: user.sessionToken,
        params: { resource },
      });
      expect(r.location!.searchParams.get('code'), resource).toBeTruthy();
    }
  });
});
