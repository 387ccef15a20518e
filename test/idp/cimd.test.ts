// Client ID Metadata Documents through a real `platform idp`: with PLATFORM_CIMD_ALLOWED_HOSTS unset, client_ids
// naming loopback, private or link-local addresses are refused as invalid_client at device authorization and
// authorize, before any connection (the listening server counts them); the token endpoint fetches nothing. With the host named exactly and the
// test CA trusted, the consent page names the document's host, checked in Chromium.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { HOST_NOT_ALLOWED } from '../../idp/cimd/fetch.ts';
import { launchChromium } from '../cli/support.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { authorizeRequest, pkcePair, postForm } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from '../helpers/tls.ts';

const REDIRECT = 'http://127.0.0.1:47615/callback';

let db: TestDatabase;
let open: IdpProcess; // PLATFORM_CIMD_ALLOWED_HOSTS unset
let named: IdpProcess; // localhost:<port> named exactly, the test CA trusted
let ca: TestCa;
let v4: TestHttpsServer;
let v6: TestHttpsServer | undefined;
let user: SeededUser;
let browser: Browser;

beforeAll(async () => {
  [db, ca, browser] = await Promise.all([createTestDatabase(), createTestCa(), launchChromium()]);
  const handler = (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => {
    const url = `https://${req.headers.host}${req.url}`;
    const redirectUris = req.url === '/elsewhere.json' ? ['https://attacker.example/cb'] : [REDIRECT];
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        client_id: url,
        client_name: 'Metadata Client',
        redirect_uris: redirectUris,
        token_endpoint_auth_method: 'none',
      }),
    );
  };
  v4 = await startHttpsServer(ca, handler);
  v6 = await startHttpsServer(ca, handler, { host: '::1' }).catch(() => undefined);
  const redisUrl = inject('redisUrl');
  [open, named] = await Promise.all([
    startIdpProcess({ databaseUrl: db.url, redisUrl }),
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl,
      env: { PLATFORM_CIMD_ALLOWED_HOSTS: `localhost:${v4.port}`, PLATFORM_CIMD_CA_FILE: ca.caFile },
    }),
  ]);
  user = await seedUser(db.pool);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all([open?.stop(), named?.stop()]);
  await Promise.all([v4?.close(), v6?.close()]);
  await db?.drop();
  await ca?.cleanup();
});

describe('with PLATFORM_CIMD_ALLOWED_HOSTS unset', () => {
  /** Refused at device authorization and authorize; the token endpoint never fetches (no grant: invalid_grant). */
  const refusedAt = async (clientId: string) => {
    const token = await postForm(`${open.issuer}/oauth/token`, {
      grant_type: 'authorization_code',
      client_id: clientId,
      code: 'x',
      code_verifier: pkcePair().verifier,
      redirect_uri: REDIRECT,
    });
    expect([token.status, token.json.error], token.text).toEqual([400, 'invalid_grant']);
    const device = await postForm(`${open.issuer}/oauth/device_authorization`, { client_id: clientId });
    expect([device.status, device.json.error]).toEqual([401, 'invalid_client']);
    const page = await authorizeRequest({
      issuer: open.issuer,
      sessionToken: user.sessionToken,
      params: { client_id: clientId, redirect_uri: REDIRECT },
    });
    expect(page.status).toBe(400);
    expect(page.location).toBeUndefined();
    return `${device.json.error_description}`;
  };

  it('refuses 127.0.0.1 and [::1] client_ids at device and authorize without connecting', async () => {
    const before = [v4.connections(), v6?.connections() ?? 0];
    expect(await refusedAt(`https://127.0.0.1:${v4.port}/client.json`)).toBe(HOST_NOT_ALLOWED);
    expect(await refusedAt(`https://[::1]:${v6?.port ?? v4.port}/client.json`)).toBe(HOST_NOT_ALLOWED);
    // localhost is just a name that resolves to loopback: refused too, unless named in the variable.
    expect(await refusedAt(`https://localhost:${v4.port}/client.json`)).toBe(HOST_NOT_ALLOWED);
    expect([v4.connections(), v6?.connections() ?? 0]).toEqual(before);
  });

  it('refuses 10.x and the link-local metadata address, naming no address (the log has it)', async () => {
    expect(await refusedAt('https://10.0.0.7/client.json')).toBe(HOST_NOT_ALLOWED);
    expect(await refusedAt('https://169.254.169.254/latest/client.json')).toBe(HOST_NOT_ALLOWED);
    expect(open.output()).toMatch(/"detail":"10\.0\.0\.7 resolves to 10\.0\.0\.7, a non-public address"/);
  });
});

describe('with the host named exactly', () => {
  it('shows the consent page naming the metadata host (Chromium), and issues a code on approval', async () => {
    const clientId = `https://localhost:${v4.port}/client.json`;
    const u = new URL(`${named.issuer}/oauth/authorize`);
    for (const [k, v] of Object.entries({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT,
      code_challenge: pkcePair().challenge,
      code_challenge_method: 'S256',
      scope: 'openid email mcp:platform',
      state: 'st',
    }))
      u.searchParams.set(k, v);
    const context = await browser.newContext();
    await context.addCookies([{ name: 'authjs.session-token', value: user.sessionToken, url: named.issuer }]);
    const page = await context.newPage();
    await page.goto(u.href);
    await page.screenshot({ path: join(tmpdir(), 'platform-cimd-consent.png'), fullPage: true });
    const text = (await page.textContent('main')) ?? '';
    expect(text).toContain('Allow Metadata Client to act for you?');
    expect(text).toContain(`Its description is published at localhost:${v4.port}.`);
    expect(text).toContain(clientId);
    const [request] = await Promise.all([
      page.waitForRequest((r) => r.url().startsWith(REDIRECT)),
      page.click('button[value=approve]'),
    ]);
    const back = new URL(request.url());
    expect(back.searchParams.get('code')).toBeTruthy();
    expect(back.searchParams.get('state')).toBe('st');
    await context.close();
  });

  it("refuses a document whose redirect URI is on another origin, and a redirect_uri it doesn't list", async () => {
    const bad = await authorizeRequest({
      issuer: named.issuer,
      sessionToken: user.sessionToken,
      params: { client_id: `https://localhost:${v4.port}/elsewhere.json`, redirect_uri: REDIRECT },
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toContain('neither loopback nor on');
    const other = await authorizeRequest({
      issuer: named.issuer,
      sessionToken: user.sessionToken,
      params: {
        client_id: `https://localhost:${v4.port}/client.json`,
        redirect_uri: 'https://attacker.example/cb',
      },
    });
    expect(other.status).toBe(400);
    expect(other.location).toBeUndefined();
  });
});
