// Session cookie precedence: a plain-named cookie can be planted by any sibling subdomain or any plain-http
// page; the __Secure- one only over https. An https issuer therefore reads only the __Secure- name, an http
// one only the plain name, and PLATFORM_SESSION_COOKIE names the one cookie. Each case plants the attacker's
// cookie next to the victim's and checks whose identity the code carries.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { authorizeRequest, CLI, exchangeCode, LOOPBACK } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const PLAIN = 'authjs.session-token';
const SECURE = '__Secure-authjs.session-token';

let db: TestDatabase;
let httpsIdp: IdpProcess;
let httpIdp: IdpProcess;
let namedIdp: IdpProcess;
let victim: SeededUser;
let attacker: SeededUser;

beforeAll(async () => {
  db = await createTestDatabase();
  const redisUrl = inject('redisUrl');
  [httpsIdp, httpIdp, namedIdp] = await Promise.all([
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl,
      env: { PLATFORM_OIDC_ISSUER: 'https://idp.platform.example' },
    }),
    startIdpProcess({ databaseUrl: db.url, redisUrl }),
    startIdpProcess({ databaseUrl: db.url, redisUrl, env: { PLATFORM_SESSION_COOKIE: 'app_session' } }),
  ]);
  victim = await seedUser(db.pool, { email: 'victim@example.com' });
  attacker = await seedUser(db.pool, { email: 'attacker@example.com' });
}, 60_000);

afterAll(async () => {
  await Promise.all([httpsIdp?.stop(), httpIdp?.stop(), namedIdp?.stop()]);
  await db?.drop();
});

/** Authorize with exactly this Cookie header; the email of the resulting access token, or the redirect. */
async function whoGetsTheCode(idp: IdpProcess, cookie: string) {
  const r = await authorizeRequest({
    issuer: idp.issuer,
    baseUrl: idp.url,
    cookieName: 'unused',
    params: {},
  });
  // authorizeRequest sends no cookie without a session token; build the request with the planted header.
  const u = new URL(`${idp.url}/oauth/authorize`);
  for (const [k, v] of Object.entries(r.params)) if (v !== undefined) u.searchParams.set(k, v);
  const res = await fetch(u, { redirect: 'manual', headers: { cookie } });
  const location = new URL(res.headers.get('location')!);
  const code = location.searchParams.get('code');
  if (!code) return { email: undefined, location };
  const tokens = await exchangeCode(idp.url, {
    code,
    verifier: r.verifier,
    redirectUri: LOOPBACK,
    clientId: CLI,
  });
  expect(tokens.status).toBe(200);
  return { email: decodeJwt(tokens.json.access_token as string).email, location };
}

describe('https issuer: only __Secure-authjs.session-token', () => {
  it("the victim's secure cookie wins over a planted plain one, in either order", async () => {
    for (const cookie of [
      `${PLAIN}=${attacker.sessionToken}; ${SECURE}=${victim.sessionToken}`,
      `${SECURE}=${victim.sessionToken}; ${PLAIN}=${attacker.sessionToken}`,
    ]) {
      expect((await whoGetsTheCode(httpsIdp, cookie)).email).toBe('victim@example.com');
    }
  });

  it('a plain cookie alone is no session (login redirect)', async () => {
    const r = await whoGetsTheCode(httpsIdp, `${PLAIN}=${attacker.sessionToken}`);
    expect(r.email).toBeUndefined();
    expect(r.location.pathname).toBe('/api/auth/signin');
  });
});

describe('http issuer: only authjs.session-token', () => {
  it('the plain cookie is read and a __Secure- one is ignored (the reverse)', async () => {
    const r = await whoGetsTheCode(
      httpIdp,
      `${SECURE}=${attacker.sessionToken}; ${PLAIN}=${victim.sessionToken}`,
    );
    expect(r.email).toBe('victim@example.com');
    const only = await whoGetsTheCode(httpIdp, `${SECURE}=${attacker.sessionToken}`);
    expect(only.email).toBeUndefined();
  });
});

describe('PLATFORM_SESSION_COOKIE names the one cookie', () => {
  it('only that name is read; both default names are ignored', async () => {
    const r = await whoGetsTheCode(
      namedIdp,
      `${PLAIN}=${attacker.sessionToken}; ${SECURE}=${attacker.sessionToken}; app_session=${victim.sessionToken}`,
    );
    expect(r.email).toBe('victim@example.com');
    const none = await whoGetsTheCode(
      namedIdp,
      `${PLAIN}=${victim.sessionToken}; ${SECURE}=${victim.sessionToken}`,
    );
    expect(none.email).toBeUndefined();
  });
});
