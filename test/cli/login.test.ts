// `platform login | token | logout` as a user runs them: real processes against a running `platform idp`, the
// browser leg in headless Chromium carrying the web application's session cookie.
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Credentials } from '../../cli/client/credentials.ts';
import type { SeededUser } from '../helpers/database.ts';
import { keyOfStoredLogin, postFormWithProof } from '../helpers/dpop-client.ts';
import { freePort, type IdpProcess, startPlatform } from '../helpers/processes.ts';
import {
  AUTHORIZE_URL,
  type ConfigHome,
  type LoginStack,
  runPlatform,
  startLoginStack,
  tempConfigHome,
} from './support.ts';

let stack: LoginStack;
let idp: IdpProcess;
let user: SeededUser;
let home: ConfigHome;

beforeAll(async () => {
  stack = await startLoginStack(inject('redisUrl'), 'Carol.Cli@Example.com');
  ({ idp, user, home } = stack);
});

afterAll(async () => {
  await stack?.stop();
});

const env = () => ({ XDG_CONFIG_HOME: home.dir, PLATFORM_ISSUER: idp.issuer });

const readStored = async () => JSON.parse(await readFile(home.credentials, 'utf8')) as Credentials;

/** Starts `platform login --no-browser` and returns the process and the URL it printed. */
async function startLogin(extraEnv: Record<string, string> = {}) {
  const p = startPlatform(['login', '--no-browser'], { ...env(), ...extraEnv });
  await p.waitFor(AUTHORIZE_URL);
  const url = new URL(AUTHORIZE_URL.exec(p.output())![1]!);
  return { p, url };
}

/** The browser leg: the web application's session cookie, the authorize URL, the loopback answer's text. */
async function signInInBrowser(url: URL): Promise<string> {
  const context = await stack.signedInContext();
  try {
    const page = await context.newPage();
    await page.goto(url.href);
    return (await page.textContent('body')) ?? '';
  } finally {
    await context.close();
  }
}

/** A refresh as the stored login's holder makes it: with a proof by its key when the tokens are DPoP-bound. */
const refresh = async (creds: Credentials) =>
  postFormWithProof(
    `${idp.issuer}/oauth/token`,
    { grant_type: 'refresh_token', refresh_token: creds.refresh_token, client_id: 'platform-cli' },
    await keyOfStoredLogin(creds),
  );

describe('platform login, token, logout against platform idp', () => {
  it('signs in through the browser, stores 0600 credentials, refreshes on expiry, revokes on logout', async () => {
    const { p, url } = await startLogin();
    expect(url.searchParams.get('client_id')).toBe('platform-cli');
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('redirect_uri')).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);

    expect(await signInInBrowser(url)).toContain(`Signed in to ${idp.issuer} as ${user.email}`);
    expect(await p.exited).toBe(0);
    expect(p.output()).toContain(`Logged in to ${idp.issuer} as ${user.email}`);

    expect((await stat(home.credentials)).mode & 0o777).toBe(0o600);
    expect((await stat(`${home.dir}/platform`)).mode & 0o777).toBe(0o700);
    const first = await readStored();
    expect(first).toMatchObject({ issuer: idp.issuer, client_id: 'platform-cli' });
    expect(first.scope.split(' ')).toEqual(expect.arrayContaining(['openid', 'email', 'mcp:platform']));
    expect(first.expires_at).toBeGreaterThan(Date.now() / 1000 + 3500);
    expect(first.refresh_token).toBeTruthy();
    expect(first.id_token).toBeTruthy();

    // `platform token` prints the stored token, verified against the published key set.
    const t1 = await runPlatform(['token'], env());
    expect(t1).toMatchObject({ code: 0, stderr: '' });
    const jwks = createRemoteJWKSet(new URL(`${idp.issuer}/.well-known/jwks.json`));
    const { payload } = await jwtVerify(t1.stdout.trim(), jwks, {
      issuer: idp.issuer,
      audience: idp.audience,
    });
    expect(payload).toMatchObject({ email: user.email, sub: user.sub, client_id: 'platform-cli' });
    expect(t1.stdout.trim()).toBe(first.access_token);

    // Within 60 s of expiry: refreshed silently, the rotated refresh token stored.
    await writeFile(
      home.credentials,
      JSON.stringify({ ...first, expires_at: Math.floor(Date.now() / 1000) + 30 }),
    );
    const t2 = await runPlatform(['token'], env());
    expect(t2.code).toBe(0);
    const second = await readStored();
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(second.access_token).toBe(t2.stdout.trim());
    expect(decodeJwt(second.access_token).jti).not.toBe(decodeJwt(first.access_token).jti);
    expect(second.expires_at).toBeGreaterThan(Date.now() / 1000 + 3500);
    expect((await stat(home.credentials)).mode & 0o777).toBe(0o600);
    await jwtVerify(second.access_token, jwks, { issuer: idp.issuer, audience: idp.audience });

    const out = await runPlatform(['logout'], env());
    expect(out.code).toBe(0);
    expect(out.stdout).toContain(`Logged out of ${idp.issuer}`);
    await expect(stat(home.credentials)).rejects.toMatchObject({ code: 'ENOENT' });
    const reuse = await refresh(second);
    expect(reuse.status).toBe(400);
    expect(reuse.json).toMatchObject({ error: 'invalid_grant' });

    const after = await runPlatform(['token'], env());
    expect(after.code).not.toBe(0);
    expect(after.stderr.trim()).toBe('platform: not logged in: run `platform login`');
  });

  it('a new login revokes the sign-in it replaces; a failed one leaves it as it was', async () => {
    const first = await startLogin();
    await signInInBrowser(first.url);
    expect(await first.p.exited).toBe(0);
    const before = await readStored();

    // A login that fails (forged answer) changes nothing.
    const failed = await startLogin();
    const forged = new URL(failed.url.searchParams.get('redirect_uri')!);
    forged.search = new URLSearchParams({ code: 'x', state: 'wrong', iss: idp.issuer }).toString();
    await fetch(forged);
    expect(await failed.p.exited).toBe(1);
    expect(await readStored()).toEqual(before);

    const second = await startLogin();
    await signInInBrowser(second.url);
    expect(await second.p.exited).toBe(0);
    expect(second.p.output()).not.toContain('warning');
    const after = await readStored();
    expect(after.refresh_token).not.toBe(before.refresh_token);
    // The replaced grant is gone at the issuer; the new one works.
    expect((await refresh(before)).json).toMatchObject({ error: 'invalid_grant' });
    const rotated = await refresh(after);
    expect(rotated.status).toBe(200);

    // A replaced sign-in whose issuer cannot be reached: the login still succeeds and says what stays valid.
    const dead = `http://127.0.0.1:${await freePort()}`;
    await writeFile(home.credentials, JSON.stringify({ ...before, issuer: dead }));
    const third = await startLogin();
    await signInInBrowser(third.url);
    expect(await third.p.exited).toBe(0);
    expect(third.p.output()).toContain(`warning: could not revoke the previous sign-in at ${dead}`);
    expect((await readStored()).issuer).toBe(idp.issuer);
    expect((await runPlatform(['logout'], env())).code).toBe(0);
  });

  it('refuses a callback whose state does not match, and says so in the browser and the terminal', async () => {
    const { p, url } = await startLogin();
    const forged = new URL(url.searchParams.get('redirect_uri')!);
    forged.search = new URLSearchParams({
      code: 'stolen',
      state: 'not-the-state',
      iss: idp.issuer,
    }).toString();
    const res = await fetch(forged);
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/^Sign-in failed: .*state mismatch/);
    expect(await p.exited).toBe(1);
    expect(p.output()).toContain(
      'platform: the browser answer does not belong to this login (state mismatch)',
    );
    await expect(stat(home.credentials)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('reports an error callback from the issuer (no session, prompt=none → login_required)', async () => {
    const { p, url } = await startLogin();
    url.searchParams.set('prompt', 'none');
    const res = await fetch(url); // follows the redirect to the loopback listener
    expect(res.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback\?error=login_required/);
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('Sign-in failed: the issuer refused the sign-in: login_required');
    expect(await p.exited).toBe(1);
    expect(p.output()).toContain('platform: the issuer refused the sign-in: login_required');
  });

  it('refuses an answer that names another issuer (RFC 9207)', async () => {
    const { p, url } = await startLogin();
    const forged = new URL(url.searchParams.get('redirect_uri')!);
    forged.search = new URLSearchParams({
      code: 'x',
      state: url.searchParams.get('state')!,
      iss: 'https://evil.example',
    }).toString();
    expect((await fetch(forged)).status).toBe(400);
    expect(await p.exited).toBe(1);
    expect(p.output()).toContain('the answer came from issuer https://evil.example');
  });

  it('gives up after PLATFORM_LOGIN_TIMEOUT with a clear message', async () => {
    const { p } = await startLogin({ PLATFORM_LOGIN_TIMEOUT: '1' });
    expect(await p.exited).toBe(1);
    expect(p.output()).toContain('platform: sign-in timed out: no answer from the browser within 1 s');
  });
});

describe('platform token without a browser', () => {
  it('prints --token / PLATFORM_TOKEN as given, without credentials', async () => {
    const a = await runPlatform(['token', '--token', 'given.by.flag'], { XDG_CONFIG_HOME: '/nonexistent' });
    expect(a).toMatchObject({ code: 0, stdout: 'given.by.flag\n' });
    const b = await runPlatform(['token'], {
      XDG_CONFIG_HOME: '/nonexistent',
      PLATFORM_TOKEN: 'from.the.env',
    });
    expect(b).toMatchObject({ code: 0, stdout: 'from.the.env\n' });
  });

  it('a refused refresh says to log in again; an unreachable issuer is named', async () => {
    const h = await tempConfigHome();
    try {
      const stale = {
        issuer: idp.issuer,
        client_id: 'platform-cli',
        access_token: 'a.b.c',
        refresh_token: 'never-issued',
        expires_at: 0,
        scope: 'openid',
      };
      await mkdir(`${h.dir}/platform`, { recursive: true });
      await writeFile(h.credentials, JSON.stringify(stale));
      const r = await runPlatform(['token'], { XDG_CONFIG_HOME: h.dir });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /^platform: the sign-in is no longer valid \(invalid_grant.*\): run `platform login`\n$/,
      );

      const dead = `http://127.0.0.1:${await freePort()}`;
      await writeFile(h.credentials, JSON.stringify({ ...stale, issuer: dead }));
      const u = await runPlatform(['token'], { XDG_CONFIG_HOME: h.dir });
      expect(u.code).toBe(1);
      expect(u.stderr).toBe(
        `platform: could not refresh the access token: cannot reach the IdP at ${dead} (stored by \`platform login\`): connection refused (is it running?)\n`,
      );

      // logout still removes the file when the issuer cannot be reached, and says what was not revoked.
      const out = await runPlatform(['logout'], { XDG_CONFIG_HOME: h.dir });
      expect(out.code).toBe(0);
      expect(out.stderr).toContain(`warning: could not revoke the sign-in at ${dead}`);
      await expect(stat(h.credentials)).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      await h.cleanup();
    }
  });
});
