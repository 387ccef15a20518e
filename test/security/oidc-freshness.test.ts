// OpenID Connect login freshness through a real `platform idp` (issue 17: "`email_verified` is always true;
// `auth_time` is the code's time, and `max_age` / `prompt=login` never make the user authenticate again" — the
// conformance checks ExpectSecondLoginPage and CheckIdTokenAuthTimeClaimsSameIfPresent failed).
// A new sign-in is what the web application does: a new Auth.js session row for the user (test/helpers/database.ts).
// Times are made different by moving a session's recorded sign-in back in the database, never by sleeping.
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sessionHash } from '../../idp/store/sessions.ts';
import {
  addSession,
  createTestDatabase,
  type SeededUser,
  seedUser,
  type TestDatabase,
} from '../helpers/database.ts';
import { type DocumentServer, startDocumentServer } from '../helpers/metadata-documents.ts';
import { authorizeRequest, exchangeCode, obtainCode, refresh } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { createTestCa, type TestCa } from '../helpers/tls.ts';

let db: TestDatabase;
let idp: IdpProcess;
let ca: TestCa;
let docs: DocumentServer;
let jwks: ReturnType<typeof createRemoteJWKSet>;

beforeAll(async () => {
  [db, ca] = await Promise.all([createTestDatabase(), createTestCa()]);
  docs = await startDocumentServer(ca);
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_CIMD_ALLOWED_HOSTS: `localhost:${docs.port}`, PLATFORM_CIMD_CA_FILE: ca.caFile },
  });
  jwks = createRemoteJWKSet(new URL(`${idp.issuer}/.well-known/jwks.json`));
}, 60_000);

afterAll(async () => {
  await idp?.stop();
  await docs?.close();
  await db?.drop();
  await ca?.cleanup();
});

const now = () => Math.floor(Date.now() / 1000);

/** The session's sign-in as recorded by the provider, moved `seconds` into the past. */
async function signedInAgo(sessionToken: string, seconds: number, known = true): Promise<number> {
  const { rows } = await db.pool.query<{ auth_time: string }>(
    `UPDATE platform.web_session_logins SET auth_time = $2, known = $3 WHERE session_hash = $1 RETURNING auth_time`,
    [sessionHash(sessionToken), now() - seconds, known],
  );
  expect(rows, 'the provider has not seen this session yet').toHaveLength(1);
  return Number(rows[0]!.auth_time);
}

/** A code for the session (platform-cli: no consent page), exchanged; the verified id_token's claims. */
async function idToken(sessionToken: string, params: Record<string, string> = {}) {
  const c = await obtainCode({ issuer: idp.issuer, sessionToken, params });
  const r = await exchangeCode(idp.issuer, c);
  expect(r.status, r.text).toBe(200);
  const { payload } = await jwtVerify(r.json.id_token as string, jwks, {
    issuer: idp.issuer,
    audience: 'platform-cli',
  });
  return { claims: payload as JWTPayload & { auth_time: number; email_verified?: boolean }, tokens: r.json };
}

/** An authorize request that the provider sends to the sign-in page; returns where the sign-in page would return. */
async function sentToSignIn(sessionToken: string | undefined, params: Record<string, string>) {
  const r = await authorizeRequest({ issuer: idp.issuer, sessionToken, params });
  expect(r.status, r.body.slice(0, 200)).toBe(302);
  expect(`${r.location!.origin}${r.location!.pathname}`).toBe(`${idp.issuer}/api/auth/signin`);
  const back = new URL(r.location!.searchParams.get('callbackUrl')!);
  expect(back.searchParams.get('platform_sign_in')).toMatch(/^\d+\.(-|[\w-]{22})\.[\w-]{43}$/);
  return { back, verifier: r.verifier, params: r.params };
}

/** The browser comes back from the sign-in page to the authorization request, with `sessionToken`. */
const comeBack = (back: URL, sessionToken: string) =>
  fetch(back, { redirect: 'manual', headers: { cookie: `authjs.session-token=${sessionToken}` } });

describe('prompt=login (ExpectSecondLoginPage)', () => {
  let user: SeededUser;
  beforeAll(async () => {
    user = await seedUser(db.pool);
  });

  it('sends a signed-in browser to sign in again; a new session yields a code whose auth_time is the new sign-in', async () => {
    const first = await idToken(user.sessionToken);
    const old = await signedInAgo(user.sessionToken, 3600);
    const started = now();
    const { back, verifier, params } = await sentToSignIn(user.sessionToken, { prompt: 'login' });

    const again = await addSession(db.pool, user.id); // the user signed in again
    const res = await comeBack(back, again);
    expect(res.status).toBe(302);
    const code = new URL(res.headers.get('location')!).searchParams.get('code');
    expect(code, res.headers.get('location') ?? '').toBeTruthy();
    const r = await exchangeCode(idp.issuer, {
      code: code!,
      verifier,
      redirectUri: params.redirect_uri!,
      clientId: 'platform-cli',
    });
    const { payload } = await jwtVerify(r.json.id_token as string, jwks, { issuer: idp.issuer });
    expect(payload.auth_time).toBeGreaterThanOrEqual(started);
    expect(payload.auth_time).toBeGreaterThan(old);
    expect(first.claims.auth_time).toBeLessThanOrEqual(payload.auth_time as number);
  });

  it('the same session coming back (the web application did not sign in again) → login_required', async () => {
    const { back, params } = await sentToSignIn(user.sessionToken, { prompt: 'login' });
    const res = await comeBack(back, user.sessionToken);
    expect(res.status).toBe(302);
    const to = new URL(res.headers.get('location')!);
    expect(`${to.origin}${to.pathname}`).toBe(params.redirect_uri);
    expect(to.searchParams.get('error')).toBe('login_required');
    expect(to.searchParams.get('state')).toBe(params.state);
  });

  it('a forged or altered marker is not believed: the browser is sent to sign in again', async () => {
    const { back } = await sentToSignIn(user.sessionToken, { prompt: 'login' });
    const [at, tag, sig] = back.searchParams.get('platform_sign_in')!.split('.');
    // Claiming the browser left before the session was first seen (or left without one) does not verify.
    back.searchParams.set('platform_sign_in', `${Number(at) - 7200}.${tag}.${sig}`);
    const res = await comeBack(back, await addSession(db.pool, user.id));
    expect(new URL(res.headers.get('location')!).pathname).toBe('/api/auth/signin');
  });

  it('prompt=login with none is invalid_request; prompt=none with a stale sign-in is login_required', async () => {
    const both = await authorizeRequest({
      issuer: idp.issuer,
      sessionToken: user.sessionToken,
      params: { prompt: 'none login' },
    });
    expect(both.location!.searchParams.get('error')).toBe('invalid_request');
    const none = await authorizeRequest({
      issuer: idp.issuer,
      sessionToken: user.sessionToken,
      params: { prompt: 'none', max_age: '0' },
    });
    expect(none.location!.searchParams.get('error')).toBe('login_required');
  });
});

describe('max_age', () => {
  let user: SeededUser;
  beforeAll(async () => {
    user = await seedUser(db.pool);
  });

  it('a session whose sign-in time is unknown (first seen, not seen signing in) must sign in again', async () => {
    await idToken(user.sessionToken); // first seen now: signed in at or before now, exactly when unknown
    const { back } = await sentToSignIn(user.sessionToken, { max_age: '86400' });
    // Coming back with the same session: still unknown → login_required.
    const same = await comeBack(back, user.sessionToken);
    expect(new URL(same.headers.get('location')!).searchParams.get('error')).toBe('login_required');
  });

  it('is honoured against the recorded sign-in: within it a code, beyond it the sign-in page; max_age=0 always asks', async () => {
    await signedInAgo(user.sessionToken, 600);
    const within = await idToken(user.sessionToken, { max_age: '3600' });
    expect(within.claims.auth_time).toBeLessThanOrEqual(now() - 600);
    await sentToSignIn(user.sessionToken, { max_age: '300' });
    await sentToSignIn(user.sessionToken, { max_age: '0' });
    const bad = await authorizeRequest({
      issuer: idp.issuer,
      sessionToken: user.sessionToken,
      params: { max_age: '-1' },
    });
    expect(bad.location!.searchParams.get('error')).toBe('invalid_request');
  });

  it('a browser without a session that signs in gets a known sign-in time: max_age is then met without asking again', async () => {
    const started = now();
    const { back, verifier, params } = await sentToSignIn(undefined, { max_age: '60' });
    const fresh = await addSession(db.pool, user.id);
    const res = await comeBack(back, fresh);
    const code = new URL(res.headers.get('location')!).searchParams.get('code');
    expect(code).toBeTruthy();
    const r = await exchangeCode(idp.issuer, {
      code: code!,
      verifier,
      redirectUri: params.redirect_uri!,
      clientId: 'platform-cli',
    });
    expect(r.status).toBe(200);
    const again = await idToken(fresh, { max_age: '60' });
    expect(again.claims.auth_time).toBeGreaterThanOrEqual(started);
  });
});

describe('auth_time is the sign-in, stable per session (CheckIdTokenAuthTimeClaimsSameIfPresent)', () => {
  it('two authorizations on one session carry the same auth_time, the recorded one (not the code time); refresh keeps it', async () => {
    const user = await seedUser(db.pool);
    await idToken(user.sessionToken);
    const recorded = await signedInAgo(user.sessionToken, 5000);
    const a = await idToken(user.sessionToken);
    const b = await idToken(user.sessionToken);
    expect(a.claims.auth_time).toBe(recorded);
    expect(b.claims.auth_time).toBe(recorded);
    expect(a.claims.iat! - a.claims.auth_time).toBeGreaterThanOrEqual(5000);
    const r = await refresh(idp.issuer, a.tokens.refresh_token as string);
    const { payload } = await jwtVerify(r.json.id_token as string, jwks, { issuer: idp.issuer });
    expect(payload.auth_time).toBe(recorded);
  });
});

describe('email_verified reflects users."emailVerified"', () => {
  it('false for a user without it, true for one with it, and the same after a refresh', async () => {
    const unverified = await seedUser(db.pool);
    const u = await idToken(unverified.sessionToken);
    expect(u.claims.email).toBe(unverified.email);
    expect(u.claims.email_verified).toBe(false);
    const r = await refresh(idp.issuer, u.tokens.refresh_token as string);
    expect((await jwtVerify(r.json.id_token as string, jwks)).payload.email_verified).toBe(false);

    const verified = await seedUser(db.pool);
    await db.pool.query(`UPDATE users SET "emailVerified" = now() WHERE id = $1`, [verified.id]);
    expect((await idToken(verified.sessionToken)).claims.email_verified).toBe(true);
  });
});

describe('a metadata-document client the user has not approved', () => {
  it('gets login_required on an IdP page, not at its redirect URI', async () => {
    const user = await seedUser(db.pool);
    const r = await authorizeRequest({
      issuer: idp.issuer,
      sessionToken: user.sessionToken,
      params: { client_id: docs.clientId('fresh'), redirect_uri: docs.callback, prompt: 'login' },
    });
    expect(r.status).toBe(302);
    const back = new URL(r.location!.searchParams.get('callbackUrl')!);
    const res = await comeBack(back, user.sessionToken);
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    expect(await res.text()).toContain('login_required');
  });
});
