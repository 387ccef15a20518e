// `platform login` with DPoP (RFC 9449) against the real IdP, gateway and tool servers: the login makes a key,
// binds the code to it (`dpop_jkt`) and the tokens (`cnf.jkt`), keeps it in the 0600 credentials, and `platform
// call` presents the token with a proof; the printed token is useless as Bearer, `platform token --proof` makes
// the proof a script needs, and `--no-dpop` gives plain bearer tokens for scripts that want them.
import { readFile, stat, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Credentials } from '../../cli/client/credentials.ts';
import { call, errorOf } from '../gateway/helpers.ts';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { jktOf, keyOfStoredLogin, postFormWithProof } from '../helpers/dpop-client.ts';
import { sessionCookieName } from '../helpers/oauth.ts';
import { startPlatform } from '../helpers/processes.ts';
import { type Stack, startStack } from '../tools/stack.ts';
import { AUTHORIZE_URL, type ConfigHome, runPlatform, tempConfigHome } from './support.ts';

let stack: Stack;
let user: SeededUser;
let home: ConfigHome;

/** A stack with one user, and a fresh config home; with `nonces`, the IdP and the gateway demand DPoP nonces. */
async function start(nonces: boolean) {
  const env: Record<string, string> = nonces ? { PLATFORM_DPOP_NONCE: 'on', GATEWAY_DPOP_NONCE: 'on' } : {};
  stack = await startStack({
    idpEnv: env,
    gatewayEnv: env,
    prepare: async (db) => {
      user = await seedUser(db.pool, { email: 'dora.dpop@example.com' });
    },
  });
  home = await tempConfigHome();
}

async function stop() {
  await home?.cleanup();
  await stack?.stop();
}

const env = () => ({
  XDG_CONFIG_HOME: home.dir,
  PLATFORM_ISSUER: stack.idp.issuer,
  PLATFORM_GATEWAY_URL: stack.baseUrl,
});
const stored = async () => JSON.parse(await readFile(home.credentials, 'utf8')) as Credentials;

/** `platform login --no-browser [extra]`, the browser leg done with the user's session cookie. */
async function login(extra: string[] = []) {
  const p = startPlatform(['login', '--no-browser', ...extra], env());
  await p.waitFor(AUTHORIZE_URL);
  const url = new URL(AUTHORIZE_URL.exec(p.output())![1]!);
  const res = await fetch(url, {
    redirect: 'manual',
    headers: { cookie: `${sessionCookieName(stack.idp.issuer)}=${user.sessionToken}` },
  });
  const callback = res.headers.get('location');
  expect(res.status, await res.text()).toBe(302);
  await (await fetch(callback!)).text();
  expect(await p.exited).toBe(0);
  return { url, output: p.output() };
}

const mcp = () => `${stack.baseUrl}/platform/mcp`;

describe('platform login with DPoP', () => {
  beforeAll(() => start(false), 120_000);
  afterAll(stop);

  it('binds the code and the tokens to a key of its own, kept 0600 with the credentials, and calls a tool with proofs', async () => {
    const { url, output } = await login();
    expect(output).not.toContain('warning');
    const creds = await stored();
    expect((await stat(home.credentials)).mode & 0o777).toBe(0o600);
    expect(creds.token_type).toBe('DPoP');
    expect(creds.dpop_key?.alg).toBe('ES256');
    const thumbprint = jktOf(creds.access_token);
    expect(thumbprint).toBeTruthy();
    expect(url.searchParams.get('dpop_jkt')).toBe(thumbprint);

    const r = await runPlatform(['call', 'platform', 'whoami'], env());
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ email: user.email, client_id: 'platform-cli' });
    const tools = await runPlatform(['tools', 'platform'], env());
    expect(tools.code, tools.stderr).toBe(0);
    expect(tools.stdout).toContain('whoami');
  });

  it('the printed token is refused as Bearer (dpop_required); with `platform token --proof` a script uses it', async () => {
    const token = (await runPlatform(['token'], env())).stdout.trim();
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const asBearer = await call(mcp(), { method: 'POST', token, headers, body });
    expect(asBearer.status).toBe(401);
    expect(errorOf(asBearer)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'dpop_required' });

    const proof = await runPlatform(['token', '--proof', '--method', 'POST', '--url', mcp()], env());
    expect(proof).toMatchObject({ code: 0, stderr: '' });
    const ok = await fetch(mcp(), {
      method: 'POST',
      headers: { ...headers, authorization: `DPoP ${token}`, dpop: proof.stdout.trim() },
      body,
    });
    expect(ok.status, await ok.clone().text()).toBe(200);
    await ok.body?.cancel();
    // A proof is good once (the replay refused), and for its own method and URL only.
    const again = await fetch(mcp(), {
      method: 'POST',
      headers: { ...headers, authorization: `DPoP ${token}`, dpop: proof.stdout.trim() },
      body,
    });
    expect(again.status).toBe(401);
    await again.body?.cancel();

    const bad = await runPlatform(['token', '--proof', '--method', 'POST'], env());
    expect(bad).toMatchObject({ code: 2, stderr: 'platform: --proof needs --method and --url\n' });
  });

  it('refreshes with a proof: the new tokens stay bound to the same key', async () => {
    const before = await stored();
    await writeFile(
      home.credentials,
      JSON.stringify({ ...before, expires_at: Math.floor(Date.now() / 1000) + 30 }),
    );
    const t = await runPlatform(['token'], env());
    expect(t).toMatchObject({ code: 0, stderr: '' });
    const after = await stored();
    expect(after.refresh_token).not.toBe(before.refresh_token);
    expect(jktOf(after.access_token)).toBe(jktOf(before.access_token));
    expect(after.dpop_key).toEqual(before.dpop_key);
  });

  it('--no-dpop logs in with bearer tokens (the new login revokes the bound one, with a proof)', async () => {
    const bound = await stored();
    await login(['--no-dpop']);
    const creds = await stored();
    expect(creds.token_type).toBeUndefined();
    expect(creds.dpop_key).toBeUndefined();
    expect(jktOf(creds.access_token)).toBeUndefined();
    const token = (await runPlatform(['token'], env())).stdout.trim();
    const asBearer = await call(mcp(), {
      method: 'POST',
      token,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(asBearer.status).toBe(200);
    // The replaced bound sign-in was revoked: its refresh token no longer works, even with its key.
    const key = await keyOfStoredLogin(bound);
    const r = await postFormWithProof(
      `${stack.idp.issuer}/oauth/token`,
      { grant_type: 'refresh_token', refresh_token: bound.refresh_token, client_id: 'platform-cli' },
      key,
    );
    expect(r.json.error).toBe('invalid_grant');
    const proof = await runPlatform(['token', '--proof', '--method', 'GET', '--url', mcp()], env());
    expect(proof.code).toBe(1);
    expect(proof.stderr).toMatch(/not DPoP-bound/);
  });
});

describe('with DPoP nonces demanded by the IdP and the gateway (use_dpop_nonce)', () => {
  beforeAll(() => start(true), 120_000);
  afterAll(stop);

  it('login, refresh, call and logout each answer the nonce challenge once and go through', async () => {
    await login();
    expect((await stored()).token_type).toBe('DPoP');
    const r = await runPlatform(['call', 'platform', 'whoami'], env());
    expect(r, r.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(r.stdout)).toMatchObject({ email: user.email });
    const before = await stored();
    await writeFile(
      home.credentials,
      JSON.stringify({ ...before, expires_at: Math.floor(Date.now() / 1000) + 30 }),
    );
    expect(await runPlatform(['token'], env())).toMatchObject({ code: 0, stderr: '' });
    expect((await stored()).refresh_token).not.toBe(before.refresh_token);
    const out = await runPlatform(['logout'], env());
    expect(out).toMatchObject({ code: 0, stderr: '' });
  });
});
