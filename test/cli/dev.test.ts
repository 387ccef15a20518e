// `platform dev` as a developer uses it: one process on embedded PGlite, the development sign-in page in a real
// browser, `platform login` against it, and a restart that keeps the signing key and the stored sign-in.
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeObjectId } from '../../cli/dev/sign-in.ts';
import { freePort, type RunningProcess, startPlatform } from '../helpers/processes.ts';
import { AUTHORIZE_URL, launchChromium, runPlatform, tempConfigHome } from './support.ts';

let dataDir: string;
let browser: Browser;
let home: Awaited<ReturnType<typeof tempConfigHome>>;
let ports: { idp: number; gateway: number };
let stack: RunningProcess | undefined;

beforeAll(async () => {
  [dataDir, browser, home] = await Promise.all([
    mkdtemp(join(tmpdir(), 'platform-dev-')),
    launchChromium(),
    tempConfigHome(),
  ]);
  ports = { idp: await freePort(), gateway: await freePort() };
});

afterAll(async () => {
  await stack?.stop();
  await browser?.close();
  await home?.cleanup();
  await rm(dataDir, { recursive: true, force: true });
});

const issuer = () => `http://localhost:${ports.idp}`;

async function startDev(): Promise<RunningProcess> {
  const p = startPlatform(['dev'], {
    HOME: home.dir,
    PLATFORM_DEV_DATA_DIR: dataDir,
    IDP_PORT: String(ports.idp),
    GATEWAY_PORT: String(ports.gateway),
    PLATFORM_MCP_PORT: '0',
    MAIL_MCP_PORT: '0',
    DEALS_MCP_PORT: '0',
    LOG_LEVEL: 'warn',
  });
  await p.waitFor(/platform dev is running/, 45_000);
  return p;
}

async function kids(): Promise<string[]> {
  const jwks = (await (await fetch(`${issuer()}/.well-known/jwks.json`)).json()) as {
    keys: Array<{ kid: string }>;
  };
  return jwks.keys.map((k) => k.kid);
}

describe('platform dev', () => {
  let firstKids: string[];
  const email = 'dana.dev@example.com';

  it('boots on embedded PGlite and prints the URLs and a copy-paste login line', {
    timeout: 60_000,
  }, async () => {
    stack = await startDev();
    const out = stack.output();
    expect(out).toContain(`IdP (issuer)     ${issuer()}`);
    // Lines that run as printed from the checkout (bin/platform.js finds a Node it can use by itself).
    expect(out).toContain(`  ./bin/platform.js login --issuer ${issuer()}\n`);
    expect(out).toContain(
      `  ./bin/platform.js call platform whoami --gateway http://localhost:${ports.gateway}\n`,
    );
    expect(out).toContain('Administrators   dev@example.com   (PLATFORM_ADMIN_EMAILS)');
    expect(out).toContain('(embedded PGlite)');
    expect(out).toContain(`Gateway          http://localhost:${ports.gateway}`);
    expect(out).toContain(`MCP platform     http://localhost:${ports.gateway}/platform/mcp`);
    expect((await stat(join(dataDir, 'dev-signing-key.pem'))).mode & 0o777).toBe(0o600);
    const meta = (await (await fetch(`${issuer()}/.well-known/openid-configuration`)).json()) as {
      issuer: string;
    };
    expect(meta.issuer).toBe(issuer());
    firstKids = await kids();
    expect(firstKids).toHaveLength(1);
    // Liveness and readiness on the stack's servers: the embedded database and (no Redis here) the gateway's
    // key set.
    const ready = async (url: string) => {
      const r = await fetch(`${url}/health/ready`);
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    expect(await ready(issuer())).toEqual({
      status: 200,
      body: { status: 'ready', checks: { postgres: 'ok' } },
    });
    expect(await ready(`http://localhost:${ports.gateway}`)).toEqual({
      status: 200,
      body: { status: 'ready', checks: { jwks: 'ok' } },
    });
    expect((await fetch(`http://localhost:${ports.gateway}/health/live`)).status).toBe(200);
  });

  it('a second dev on the same data, or a bad variable, stops with one line', async () => {
    const again = await runPlatform(['dev'], {
      PLATFORM_DEV_DATA_DIR: dataDir,
      IDP_PORT: String(ports.idp),
      HOME: home.dir,
    });
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^platform: .*pglite is in use by another process \(pid \d+\)/);
    const bad = await runPlatform(['dev'], {
      PLATFORM_DEV_DATA_DIR: dataDir,
      IDP_PORT: 'four',
      HOME: home.dir,
    });
    expect(bad).toMatchObject({
      code: 2,
      stderr: 'platform: configuration error: IDP_PORT: must be a port number, got "four"\n',
    });
  });

  it('signs in through the development sign-in page with platform login', { timeout: 30_000 }, async () => {
    const login = startPlatform(['login', '--no-browser', '--issuer', issuer()], {
      XDG_CONFIG_HOME: home.dir,
    });
    await login.waitFor(AUTHORIZE_URL);
    const url = AUTHORIZE_URL.exec(login.output())![1]!;

    const page = await browser.newPage();
    await page.goto(url);
    // No session yet: the IdP sent the browser to the sign-in page on its own origin.
    expect(page.url()).toMatch(new RegExp(`^${issuer()}/api/auth/signin\\?callbackUrl=`));
    await page.fill('input[name=email]', email.toUpperCase());
    await Promise.all([
      page.waitForURL(/^http:\/\/127\.0\.0\.1:\d+\/callback\?/),
      page.click('button[type=submit]'),
    ]);
    expect(await page.textContent('body')).toContain(`Signed in to ${issuer()} as ${email}`);
    await page.close();
    expect(await login.exited).toBe(0);

    const token = await runPlatform(['token'], { XDG_CONFIG_HOME: home.dir });
    expect(token.code).toBe(0);
    const { payload } = await jwtVerify(
      token.stdout.trim(),
      createRemoteJWKSet(new URL(`${issuer()}/.well-known/jwks.json`)),
      {
        issuer: issuer(),
        audience: `http://localhost:${ports.gateway}`,
      },
    );
    expect(payload).toMatchObject({ email, sub: fakeObjectId(email) });
    expect(String(payload.scope).split(' ')).toEqual(
      expect.arrayContaining(['openid', 'mcp:platform', 'mcp:mail', 'mcp:deals']),
    );
  });

  it('refuses to send the browser anywhere but its own origin after sign-in', async () => {
    const res = await fetch(`${issuer()}/api/auth/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ email: 'eve@example.com', callbackUrl: 'https://evil.example/steal' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('location')).toBeNull();
    const crossSite = await fetch(`${issuer()}/api/auth/signin`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' },
      body: new URLSearchParams({ email: 'eve@example.com', callbackUrl: '/' }),
    });
    expect(crossSite.status).toBe(403);
    // A page elsewhere with Referrer-Policy: no-referrer makes the browser send `Origin: null`; only a
    // same-origin Sec-Fetch-Site (what Chromium sends for the page's own form) makes that acceptable.
    const opaque = await fetch(`${issuer()}/api/auth/signin`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        origin: 'null',
        'sec-fetch-site': 'cross-site',
      },
      body: new URLSearchParams({ email: 'eve@example.com', callbackUrl: '/' }),
    });
    expect(opaque.status).toBe(403);
  });

  it('restarts on the same data: same signing key, and the stored sign-in still refreshes', {
    timeout: 60_000,
  }, async () => {
    expect(await stack!.stop()).toBe(0);
    stack = await startDev();
    expect(stack.output()).not.toContain('new signing key created');
    expect(await kids()).toEqual(firstKids);

    // Force a refresh: the refresh token lives in the embedded database, which survived the restart.
    const creds = JSON.parse(await readFile(join(home.dir, 'platform', 'credentials.json'), 'utf8'));
    await writeFile(
      join(home.dir, 'platform', 'credentials.json'),
      JSON.stringify({ ...creds, expires_at: 0 }),
    );
    const token = await runPlatform(['token'], { XDG_CONFIG_HOME: home.dir });
    expect(token.code).toBe(0);
    expect(token.stdout.trim()).not.toBe(creds.access_token);
  });

  it('calls a tool through the gateway; after logout the same token is refused at once', {
    timeout: 30_000,
  }, async () => {
    const gateway = `http://localhost:${ports.gateway}`;
    const env = { XDG_CONFIG_HOME: home.dir, PLATFORM_GATEWAY_URL: gateway };
    const who = await runPlatform(['call', 'platform', 'whoami'], env);
    expect(who.stderr).toBe('');
    expect(who.code).toBe(0);
    expect(JSON.parse(who.stdout)).toMatchObject({
      email,
      sub: fakeObjectId(email),
      issuer: 'platform',
      client_id: 'platform-cli',
    });

    const token = (await runPlatform(['token'], env)).stdout.trim();
    expect((await runPlatform(['logout'], env)).code).toBe(0);
    // The IdP and the gateway share the in-process revocation store: no Redis, no delay.
    const refused = await runPlatform(['call', 'platform', 'whoami'], { ...env, PLATFORM_TOKEN: token });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('answered 401: INVALID_TOKEN');
    expect(refused.stderr).toContain('token_revoked');
  });
});
