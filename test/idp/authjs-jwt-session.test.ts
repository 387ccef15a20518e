// Auth.js JWT-strategy sessions (docs/idp.md § Web sessions): with PLATFORM_AUTHJS_SECRET the provider reads the
// web application's encrypted session cookie as Auth.js does. Every cookie here is made by Auth.js itself
// (@auth/core's `encode`, and its cookie SessionStore's chunking), never by hand: a real `platform idp` must find
// the user in each good one, and count an expired, foreign-secret, tampered or unknown-email one as no session.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { encodeAuthjsSession } from '../../idp/session/authjs-jwt.ts';
import { authjsCookieHeader, authjsJwt } from '../helpers/authjs.ts';
import { registerClient } from '../helpers/clients.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { authorizeRequest, exchangeCode, LOOPBACK, postForm } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const COOKIE = 'authjs.session-token';
// Rotation as Auth.js takes it: the newest secret first.
const NEW_SECRET = 'new-secret-4b1f0c9e7d2a6b8c3e5f1a0d9c8b7a6e';
const OLD_SECRET = 'old-secret-9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d';
const FOREIGN_SECRET = 'foreign-secret-1f2e3d4c5b6a79880f1e2d3c4b5a6978';

let db: TestDatabase;
let idp: IdpProcess;
let dbOnlyIdp: IdpProcess;
let httpsIdp: IdpProcess;
let user: SeededUser;
let admin: SeededUser;

beforeAll(async () => {
  db = await createTestDatabase();
  const redisUrl = inject('redisUrl');
  [idp, dbOnlyIdp, httpsIdp] = await Promise.all([
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl,
      env: {
        PLATFORM_AUTHJS_SECRET: `${NEW_SECRET},${OLD_SECRET}`,
        PLATFORM_ADMIN_EMAILS: 'jwt-admin@example.com',
      },
    }),
    startIdpProcess({ databaseUrl: db.url, redisUrl }),
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl,
      env: { PLATFORM_AUTHJS_SECRET: NEW_SECRET, PLATFORM_OIDC_ISSUER: 'https://idp.platform.example' },
    }),
  ]);
  user = await seedUser(db.pool, { email: 'Jwt.User@Example.com' });
  admin = await seedUser(db.pool, { email: 'jwt-admin@example.com' });
}, 60_000);

afterAll(async () => {
  await Promise.all([idp?.stop(), dbOnlyIdp?.stop(), httpsIdp?.stop()]);
  await db?.drop();
});

/** The session token Auth.js's `encode` makes for this user's sign-in (`salt` = the cookie name, as Auth.js does). */
async function authjsToken(
  o: { email: string; sub?: string; extra?: Record<string, unknown> },
  secret: string | string[] = [NEW_SECRET, OLD_SECRET],
  maxAge = 30 * 24 * 3600,
): Promise<string> {
  return (await authjsJwt()).encode({
    token: { name: 'Test User', email: o.email, sub: o.sub, ...o.extra },
    secret,
    salt: COOKIE,
    maxAge,
  });
}

const cookieHeader = (token: string) => authjsCookieHeader(COOKIE, token);

/** Authorize as platform-cli with exactly this Cookie header: the access token's email, or the redirect. */
async function whoSignsIn(cookie: string, on: IdpProcess = idp) {
  const r = await authorizeRequest({ issuer: on.issuer, baseUrl: on.url, params: {} });
  const u = new URL(`${on.url}/oauth/authorize`);
  for (const [k, v] of Object.entries(r.params)) if (v !== undefined) u.searchParams.set(k, v);
  const res = await fetch(u, { redirect: 'manual', headers: { cookie } });
  expect(res.status).toBe(302);
  const location = new URL(res.headers.get('location')!);
  const code = location.searchParams.get('code');
  if (!code) return { email: undefined, location };
  const tokens = await exchangeCode(on.url, {
    code,
    verifier: r.verifier,
    redirectUri: LOOPBACK,
    clientId: 'platform-cli',
  });
  expect(tokens.status).toBe(200);
  return { email: decodeJwt(tokens.json.access_token as string).email, location };
}

function expectNoSession(r: { email: unknown; location: URL }) {
  expect(r.email).toBeUndefined();
  expect(r.location.pathname).toBe('/api/auth/signin');
}

describe('an Auth.js JWT-strategy session counts as the web session', () => {
  it('a plain cookie made by Auth.js: the user found by its email, lowercased', async () => {
    const token = await authjsToken({ email: 'JWT.USER@example.com', sub: String(user.id) });
    expect(await cookieHeader(token)).not.toContain(`${COOKIE}.0=`);
    expect((await whoSignsIn(await cookieHeader(token))).email).toBe(user.email);
  });

  it('a chunked cookie (<name>.0, .1, …), as Auth.js chunks a large session, reassembled', async () => {
    const token = await authjsToken({
      email: user.email,
      extra: { picture: `https://img.example/${'p'.repeat(9000)}` },
    });
    const cookie = await cookieHeader(token);
    expect(cookie).toContain(`${COOKIE}.0=`);
    expect(cookie).toContain(`${COOKIE}.2=`);
    expect((await whoSignsIn(cookie)).email).toBe(user.email);
    // The chunks in another order in the header: still the session.
    expect((await whoSignsIn(cookie.split('; ').reverse().join('; '))).email).toBe(user.email);
    // The unchunked name beside the chunks (another session planted there, or a leftover): no session, whichever
    // of the two is the user's.
    const planted = `${COOKIE}=${await authjsToken({ email: admin.email })}`;
    expectNoSession(await whoSignsIn(`${cookie}; ${planted}`));
    expectNoSession(await whoSignsIn(`${planted}; ${cookie}`));
    // A chunk missing: no session.
    const parts = cookie.split('; ').filter((c) => !c.startsWith(`${COOKIE}.1=`));
    expectNoSession(await whoSignsIn(parts.join('; ')));
  });

  it('a cookie sealed with the older of two rotated secrets', async () => {
    const token = await authjsToken({ email: user.email }, OLD_SECRET);
    expect((await whoSignsIn(await cookieHeader(token))).email).toBe(user.email);
  });

  it('the cookie `platform dev --session jwt` makes is one Auth.js itself decodes', async () => {
    const { decode } = await authjsJwt();
    const ours = await encodeAuthjsSession({
      secret: NEW_SECRET,
      cookieName: COOKIE,
      claims: { email: user.email },
      maxAgeSeconds: 600,
    });
    expect((await decode({ token: ours, secret: NEW_SECRET, salt: COOKIE }))?.email).toBe(user.email);
    expect((await whoSignsIn(await cookieHeader(ours))).email).toBe(user.email);
  });

  it('expired, foreign-secret, tampered and unknown-email cookies are no session', async () => {
    expectNoSession(
      await whoSignsIn(await cookieHeader(await authjsToken({ email: user.email }, NEW_SECRET, -60))),
    ); // expired
    expectNoSession(
      await whoSignsIn(await cookieHeader(await authjsToken({ email: user.email }, FOREIGN_SECRET))),
    );
    const good = await authjsToken({ email: user.email });
    const parts = good.split('.');
    const ct = parts[3]!;
    parts[3] = (ct[0] === 'A' ? 'B' : 'A') + ct.slice(1);
    expectNoSession(await whoSignsIn(await cookieHeader(parts.join('.')))); // tampered ciphertext
    expectNoSession(await whoSignsIn(await cookieHeader(await authjsToken({ email: 'nobody@example.com' }))));
    // Without PLATFORM_AUTHJS_SECRET, a good JWT session is no session either.
    expectNoSession(await whoSignsIn(await cookieHeader(good), dbOnlyIdp));
  });

  it('an https issuer reads __Secure-authjs.session-token (its name the salt), chunked or not, and not the plain name', async () => {
    const SECURE = '__Secure-authjs.session-token';
    const { encode } = await authjsJwt();
    const small = await encode({ token: { email: user.email }, secret: NEW_SECRET, salt: SECURE });
    const large = await encode({
      token: { email: user.email, picture: 'p'.repeat(6000) },
      secret: NEW_SECRET,
      salt: SECURE,
    });
    expect((await whoSignsIn(await authjsCookieHeader(SECURE, small), httpsIdp)).email).toBe(user.email);
    const chunked = await authjsCookieHeader(SECURE, large);
    expect(chunked).toContain(`${SECURE}.1=`);
    expect((await whoSignsIn(chunked, httpsIdp)).email).toBe(user.email);
    // The plain name is not read on https, even holding a good session for it.
    expectNoSession(await whoSignsIn(await cookieHeader(await authjsToken({ email: user.email })), httpsIdp));
  });

  it("two users with one email: the one whose id is the token's sub", async () => {
    const [a, b] = [
      await seedUser(db.pool, { email: 'Shared@example.com' }),
      await seedUser(db.pool, { email: 'shared@example.com' }),
    ];
    const signInAs = async (sub: string | undefined) => {
      const r = await authorizeRequest({ issuer: idp.issuer, params: {} });
      const u = new URL(`${idp.url}/oauth/authorize`);
      for (const [k, v] of Object.entries(r.params)) if (v !== undefined) u.searchParams.set(k, v);
      const cookie = await cookieHeader(await authjsToken({ email: 'shared@example.com', sub }));
      const res = await fetch(u, { redirect: 'manual', headers: { cookie } });
      const code = new URL(res.headers.get('location')!).searchParams.get('code');
      if (!code) return undefined;
      const t = await exchangeCode(idp.url, {
        code,
        verifier: r.verifier,
        redirectUri: LOOPBACK,
        clientId: 'platform-cli',
      });
      return decodeJwt(t.json.access_token as string).sub;
    };
    expect(await signInAs(String(b.id))).toBe(b.sub);
    expect(await signInAs(String(a.id))).toBe(a.sub);
    // Neither named: which one is not guessed.
    expect(await signInAs(undefined)).toBeUndefined();
  });

  it('database sessions keep working beside it', async () => {
    expect((await whoSignsIn(`${COOKIE}=${user.sessionToken}`)).email).toBe(user.email);
  });
});

describe('every page that needs the web session takes it', () => {
  it('the consent page and its answer (CSRF bound to the session)', async () => {
    const client = await registerClient(idp.url, {
      client_name: 'JWT consent client',
      redirect_uris: [LOOPBACK],
    });
    const token = await authjsToken({ email: user.email });
    const r = await authorizeRequest({
      issuer: idp.issuer,
      sessionToken: token,
      cookieName: COOKIE,
      consent: 'approve',
      params: { client_id: client.json.client_id },
    });
    expect(r.consentShown).toBe(true);
    expect(r.status).toBe(302);
    expect(r.location?.searchParams.get('code')).toBeTruthy();
  });

  it('the device verification page', async () => {
    const start = await postForm(`${idp.url}/oauth/device_authorization`, {
      client_id: 'platform-cli',
      scope: 'openid mcp:platform',
    });
    expect(start.status).toBe(200);
    const url = start.json.verification_uri_complete as string;
    const without = await fetch(url, { redirect: 'manual' });
    expect(without.status).toBe(302);
    const page = await fetch(url, {
      redirect: 'manual',
      headers: { cookie: await cookieHeader(await authjsToken({ email: user.email })) },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(start.json.user_code as string);
  });

  it('the admin console', async () => {
    const without = await fetch(`${idp.url}/admin/audit`, { redirect: 'manual' });
    expect(without.status).toBe(302);
    const page = await fetch(`${idp.url}/admin/audit`, {
      redirect: 'manual',
      headers: { cookie: await cookieHeader(await authjsToken({ email: admin.email })) },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('jwt-admin@example.com');
  });
});

describe('login freshness (prompt=login) with JWT sessions', () => {
  /** prompt=login as platform-cli with `cookie` (or none); then the return from the sign-in page with `back`. */
  async function promptLogin(cookie: string | undefined, back: () => Promise<string>) {
    const r = await authorizeRequest({ issuer: idp.issuer, params: { prompt: 'login', scope: 'openid' } });
    const u = new URL(`${idp.url}/oauth/authorize`);
    for (const [k, v] of Object.entries(r.params)) if (v !== undefined) u.searchParams.set(k, v);
    const first = await fetch(u, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    const login = new URL(first.headers.get('location')!);
    expect(login.pathname).toBe('/api/auth/signin');
    const callback = login.searchParams.get('callbackUrl')!;
    const again = await fetch(callback.replace(idp.issuer, idp.url), {
      redirect: 'manual',
      headers: { cookie: await back() },
    });
    const to = new URL(again.headers.get('location')!);
    const code = to.searchParams.get('code');
    if (!code) return { error: to.searchParams.get('error'), authTime: undefined };
    const tokens = await exchangeCode(idp.url, {
      code,
      verifier: r.verifier,
      redirectUri: LOOPBACK,
      clientId: 'platform-cli',
    });
    expect(tokens.status, tokens.text).toBe(200);
    return { error: undefined, authTime: decodeJwt(tokens.json.id_token as string).auth_time };
  }
  const now = () => Math.floor(Date.now() / 1000);

  it('without auth_time, a cookie re-issued by the application is not a new sign-in: login_required', async () => {
    const before = await cookieHeader(await authjsToken({ email: user.email }));
    // Auth.js re-issues the session's cookie whenever the application reads it: a new value, no sign-in.
    const r = await promptLogin(before, async () => cookieHeader(await authjsToken({ email: user.email })));
    expect(r.error).toBe('login_required');
  });

  it('without auth_time, a browser that left with no session and came back with one signed in', async () => {
    const r = await promptLogin(undefined, async () =>
      cookieHeader(await authjsToken({ email: user.email })),
    );
    expect(r.error).toBeUndefined();
  });

  it("with the application's auth_time: a new sign-in counts (its time in the id_token), a re-issue does not", async () => {
    const old = now() - 3600;
    const before = await cookieHeader(await authjsToken({ email: user.email, extra: { auth_time: old } }));
    const reissued = await promptLogin(before, async () =>
      cookieHeader(await authjsToken({ email: user.email, extra: { auth_time: old } })),
    );
    expect(reissued.error).toBe('login_required');
    const signedIn = now() + 1;
    const again = await promptLogin(before, async () =>
      cookieHeader(await authjsToken({ email: user.email, extra: { auth_time: signedIn } })),
    );
    expect(again).toEqual({ error: undefined, authTime: signedIn });
  });
});
