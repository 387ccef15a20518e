// The admin console at /admin, as an administrator uses it: a real `platform idp` (managed entitlements), the
// web application's session cookie, headless Chromium; and, for what the user sees, a real `platform gateway`
// with the `platform` tool server behind it and the user's own `platform login` / `platform call`. One browser,
// one IdP, one gateway for the file. The screenshots in docs/console/ are taken here (UPDATE_SCREENSHOTS=1).
import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { readCredentials } from '../../cli/client/credentials.ts';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { AUTHORIZE_URL, launchChromium, runPlatform, tempConfigHome } from '../cli/support.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { pkcePair, refresh, sessionCookieName, signIn } from '../helpers/oauth.ts';
import {
  freePort,
  type GatewayProcess,
  type IdpProcess,
  type RunningProcess,
  startGatewayProcess,
  startIdpProcess,
  startPlatform,
} from '../helpers/processes.ts';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from '../helpers/tls.ts';

// The run saves a screenshot of each page: into docs/console/ with UPDATE_SCREENSHOTS=1 (what docs/console.md
// shows), else into a temporary folder, so that an ordinary run leaves the checkout as it was.
const SHOTS =
  process.env.UPDATE_SCREENSHOTS === '1'
    ? new URL('../../docs/console/', import.meta.url)
    : pathToFileURL(`${mkdtempSync(join(tmpdir(), 'platform-console-screens-'))}/`);
const IDENTITY_SECRET = 'console-test-identity-secret-0123456789abcdef';
/** A connector's https callback (allowlisted for web registration) and a metadata-document client's loopback one. */
const CONNECTOR = 'https://claude.ai/api/mcp/auth_callback';
const CIMD_REDIRECT = 'http://127.0.0.1:47615/callback';

let db: TestDatabase;
let idp: IdpProcess;
let gateway: GatewayProcess;
let tool: RunningProcess;
let ca: TestCa;
let cimd: TestHttpsServer;
let home: Awaited<ReturnType<typeof tempConfigHome>>;
let browser: Browser;
let root: SeededUser;
let alice: SeededUser;
let admin: BrowserContext;
let aliceBrowser: BrowserContext;
let page: Page;
/** The registered connector's client_id (POST /oauth/register). */
let connectorId: string;
/** The metadata-document client's client_id: its document's URL. */
let cimdId: string;

const cookie = (u: SeededUser) => `${sessionCookieName(idp.issuer)}=${u.sessionToken}`;
const hash = (t: string) => createHash('sha256').update(t).digest('base64url');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const familyOf = async (refreshToken: string) =>
  (
    await db.pool.query<{ family_id: string }>(
      'SELECT family_id::text FROM platform.refresh_tokens WHERE token_hash = $1',
      [hash(refreshToken)],
    )
  ).rows[0]!.family_id;

async function contextFor(u: SeededUser): Promise<BrowserContext> {
  const c = await browser.newContext({ viewport: { width: 1360, height: 900 }, acceptDownloads: true });
  await c.addCookies([{ name: sessionCookieName(idp.issuer), value: u.sessionToken, url: idp.issuer }]);
  return c;
}

/** Every console page: the strict policy, no-store, and not one script or inline event handler. */
function expectStrictPage(headers: Record<string, string>, body: string): void {
  expect(headers['content-type']).toMatch(/^text\/html/);
  expect(headers['cache-control']).toBe('no-store');
  const csp = headers['content-security-policy'] ?? '';
  expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/=]+'; form-action 'self';/);
  expect(csp).toContain("frame-ancestors 'none'");
  // The page's one stylesheet is the one the policy allows (else the browser shows it unstyled).
  const style = /<style>([\s\S]*?)<\/style>/.exec(body)![1]!;
  expect(csp).toContain(`'sha256-${createHash('sha256').update(style).digest('base64')}'`);
  expect(body.match(/<style/g)).toHaveLength(1);
  expect(body).not.toMatch(/<script/i);
  expect(body).not.toMatch(/\son[a-z]+\s*=/i);
  expect(body).not.toMatch(/\sstyle\s*=/i);
}

/** Clicks a button that submits its form, and waits for the page the answer leads to. */
async function submit(selector: string): Promise<void> {
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}

async function shot(name: string, p: Page = page): Promise<void> {
  await p.screenshot({ path: new URL(`${name}.png`, SHOTS).pathname, fullPage: true });
}

/** A form post as a browser would not send it: straight from a script, with the admin's cookie. */
async function post(path: string, form: Record<string, string>, headers: Record<string, string> = {}) {
  const res = await fetch(`${idp.issuer}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: cookie(root), 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, location: res.headers.get('location'), text: await res.text() };
}

async function csrfOf(u: SeededUser, path: string): Promise<string> {
  const res = await fetch(`${idp.issuer}${path}`, { headers: { cookie: cookie(u) } });
  return /name="csrf_token" value="([^"]+)"/.exec(await res.text())![1]!;
}

/** The user's own command line: the stored login in a config home of its own, the gateway, the IdP. */
const cliEnv = () => ({
  XDG_CONFIG_HOME: home.dir,
  PLATFORM_ISSUER: idp.issuer,
  PLATFORM_GATEWAY_URL: gateway.url,
});
const whoami = () => runPlatform(['call', 'platform', 'whoami'], cliEnv());
const stored = async () => (await readCredentials(home.credentials))!;

/** `platform login --no-browser`, the printed URL opened in the user's browser (her web session). */
async function cliLogin(): Promise<void> {
  const p = startPlatform(['login', '--no-browser'], cliEnv());
  await p.waitFor(AUTHORIZE_URL);
  const tab = await aliceBrowser.newPage();
  try {
    await tab.goto(AUTHORIZE_URL.exec(p.output())![1]!);
    expect(await tab.textContent('body')).toContain(`Signed in to ${idp.issuer} as ${alice.email}`);
  } finally {
    await tab.close();
  }
  expect(await p.exited, p.output()).toBe(0);
}

/** The user approves a client's consent page in her browser; the client's redirect URI gets a code. */
async function approveConsent(clientId: string, redirectUri: string, name: string): Promise<void> {
  const u = new URL(`${idp.issuer}/oauth/authorize`);
  const params = {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    code_challenge: pkcePair().challenge,
    code_challenge_method: 'S256',
    scope: 'openid email mcp:platform mcp:mail mcp:deals',
    state: 'st',
  };
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  const tab = await aliceBrowser.newPage();
  try {
    // The client's side of the redirect is not the test's business: answered here, never leaving the machine.
    await tab.route(
      (url) => url.href.startsWith(redirectUri),
      (r) => r.fulfill({ status: 200, contentType: 'text/plain', body: 'back at the client' }),
    );
    await tab.goto(u.href);
    expect(await tab.textContent('main')).toContain(`Allow ${name} to act for you?`);
    const [back] = await Promise.all([
      tab.waitForRequest((r) => r.url().startsWith(redirectUri)),
      tab.click('button[value=approve]'),
    ]);
    expect(new URL(back.url()).searchParams.get('code')).toBeTruthy();
  } finally {
    await tab.close();
  }
}

/** Polls the gateway with `token` until it refuses it as revoked (401 token_revoked); how long that took. */
async function gatewayRefuses(token: string, limitMs = 1000): Promise<number> {
  const started = Date.now();
  for (;;) {
    const res = await fetch(`${gateway.url}/platform/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    const text = await res.text();
    if (res.status === 401 && text.includes('token_revoked')) return Date.now() - started;
    if (Date.now() - started > limitMs) throw new Error(`still ${res.status} after ${limitMs} ms: ${text}`);
    await sleep(25);
  }
}

async function register(metadata: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${idp.issuer}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(metadata),
  });
  const json = (await res.json()) as { client_id: string };
  expect(res.status, JSON.stringify(json)).toBe(201);
  return json.client_id;
}

beforeAll(async () => {
  [db, browser, ca, home] = await Promise.all([
    createTestDatabase(),
    launchChromium(),
    createTestCa(),
    tempConfigHome(),
  ]);
  // A client known by its metadata document, served over https by the test CA's certificate.
  cimd = await startHttpsServer(ca, (req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        client_id: `https://${req.headers.host}${req.url}`,
        client_name: 'Meeting notes',
        redirect_uris: [CIMD_REDIRECT],
        token_endpoint_auth_method: 'none',
      }),
    );
  });
  cimdId = `https://localhost:${cimd.port}/client.json`;
  root = await seedUser(db.pool, { email: 'Root.Admin@Example.com' });
  alice = await seedUser(db.pool, { email: 'alice.console@example.com' });
  const redisUrl = inject('redisUrl');
  // Picked just before the processes listen on them: a port freed seconds earlier (before Chromium started) was
  // once taken meanwhile (EADDRINUSE in CI).
  const [idpPort, gatewayPort, toolPort] = [await freePort(), await freePort(), await freePort()];
  const issuer = `http://127.0.0.1:${idpPort}`;
  const audience = 'https://platform.test/api';
  const baseUrl = `http://127.0.0.1:${gatewayPort}`;
  // The IdP, the tool server and the gateway start together: the gateway finds the IdP's keys when first asked.
  const starting = {
    idp: startIdpProcess({
      databaseUrl: db.url,
      redisUrl,
      port: idpPort,
      env: {
        PLATFORM_OIDC_ISSUER: issuer,
        PLATFORM_AUDIENCE: audience,
        PLATFORM_ADMIN_EMAILS: root.email,
        PLATFORM_ENTITLEMENTS: 'managed',
        PLATFORM_ALLOWED_REDIRECT_URIS: CONNECTOR,
        PLATFORM_CIMD_ALLOWED_HOSTS: `localhost:${cimd.port}`,
        PLATFORM_CIMD_CA_FILE: ca.caFile,
      },
    }),
    tool: (async () => {
      const p = startPlatform(['tool', 'platform'], {
        DATABASE_URL: db.url,
        TOOL_IDENTITY_KEY: deriveIdentityKey(IDENTITY_SECRET, 'platform'),
        PLATFORM_MCP_PORT: String(toolPort),
      });
      await p.waitFor(/platform tool server listening/, 30_000);
      return p;
    })(),
    gateway: startGatewayProcess(
      {
        PUBLIC_BASE_URL: baseUrl,
        GATEWAY_SERVICES: 'platform',
        PLATFORM_MCP_UPSTREAM: `http://127.0.0.1:${toolPort}`,
        PLATFORM_ISSUER: issuer,
        PLATFORM_AUDIENCE: audience,
        REDIS_URL: redisUrl,
        GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
      },
      gatewayPort,
    ),
  };
  const [i, t, g] = await Promise.allSettled([starting.idp, starting.tool, starting.gateway]);
  if (i.status === 'fulfilled') idp = i.value;
  if (t.status === 'fulfilled') tool = t.value;
  if (g.status === 'fulfilled') gateway = g.value;
  for (const r of [i, t, g]) if (r.status === 'rejected') throw r.reason;

  // Clients: a connector registered with an https callback, a desktop client with none of the user's consents.
  connectorId = await register({
    application_type: 'web',
    redirect_uris: [CONNECTOR],
    client_name: 'Claude connector',
  });
  await register({ redirect_uris: ['http://127.0.0.1:6274/oauth/callback'], client_name: 'MCP Inspector' });
  // Two days of traffic so that the chart has something to draw (the append-only audit takes inserts).
  await db.pool.query(
    `INSERT INTO platform.issuance_audit (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at)
     SELECT now() - (g * interval '1 minute' * 7), gen_random_uuid(), 'refresh_token', 'u' || (g % 40), 's' || (g % 40),
            'user' || (g % 40) || '@example.com', CASE WHEN g % 5 = 0 THEN 'https://app.example.com/cimd.json' ELSE 'platform-cli' END,
            'openid email mcp:' || (ARRAY['mail','deals','calendar','crm'])[1 + g % 4], now()
       FROM generate_series(1, 400) g WHERE (g / 30) % 3 <> 1 OR g % 2 = 0`,
  );
  await db.pool.query(
    `INSERT INTO platform.refusal_audit (at, source, error, reason, email, client_id, grant_type)
     SELECT now() - (g * interval '1 minute' * 41), 'token', 'invalid_grant', 'refresh token is invalid',
            'user' || (g % 40) || '@example.com', 'platform-cli', 'refresh_token'
       FROM generate_series(1, 60) g`,
  );
  [admin, aliceBrowser] = await Promise.all([contextFor(root), contextFor(alice)]);
  page = await admin.newPage();
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([idp?.stop(), gateway?.stop(), tool?.stop()]);
  await cimd?.close();
  await db?.drop();
  await Promise.all([ca?.cleanup(), home?.cleanup()]);
});

describe('the admin console', () => {
  it('sends a visitor without a session to the sign-in page and a non-administrator to a 403 page', async () => {
    const res = await fetch(`${idp.issuer}/admin/audit?email=a%40b.c`, { redirect: 'manual' });
    expect(res.status).toBe(302);
    const login = new URL(res.headers.get('location')!);
    expect(`${login.origin}${login.pathname}`).toBe(`${idp.issuer}/api/auth/signin`);
    expect(login.searchParams.get('callbackUrl')).toBe(`${idp.issuer}/admin/audit?email=a%40b.c`);

    const denied = await fetch(`${idp.issuer}/admin/audit`, { headers: { cookie: cookie(alice) } });
    const body = await denied.text();
    expect(denied.status).toBe(403);
    expectStrictPage(Object.fromEntries(denied.headers), body);
    expect(body).toContain('not one of the platform');
    // Nor does the admin API open to a web session.
    expect((await fetch(`${idp.issuer}/admin/api/audit`, { headers: { cookie: cookie(root) } })).status).toBe(
      401,
    );

    const p = await aliceBrowser.newPage();
    await p.goto(`${idp.issuer}/admin`);
    await shot('forbidden', p);
    await p.close();
  });

  // About twenty CLI processes and page loads one after another: 18 s alone, past 30 s in a loaded CI run.
  it('finds a user, grants and ungrants a service, revokes a sign-in and then the user: her next `platform call` is refused', async () => {
    const first = await page.goto(`${idp.issuer}/admin`);
    expect(page.url()).toBe(`${idp.issuer}/admin/audit`);
    expectStrictPage(first!.headers(), await first!.text());
    await expect(page.locator('svg.chart rect.bar-issued').count()).resolves.toBe(48);
    await shot('audit');

    // Find the user by part of the email: one match goes straight to the user's page.
    await page.fill('form.find input[name=email]', 'ALICE.con');
    await submit('form.find button');
    expect(page.url(), (await page.textContent('main')) ?? '').toBe(
      `${idp.issuer}/admin/users/alice.console%40example.com`,
    );
    expect(await page.textContent('h1')).toBe('alice.console@example.com');

    // Managed entitlements: grant platform and mail; the next token carries them (and not deals, never granted).
    await submit('form[action$="/grant"]:has(input[value="platform"]) button');
    expect(await page.textContent('.flash')).toContain('Granted platform to alice.console@example.com');
    await submit('form[action$="/grant"]:has(input[value="mail"]) button');
    expect(await page.textContent('.flash')).toContain('Granted mail to alice.console@example.com');

    // The user logs in on her command line and calls a tool through the gateway.
    await cliLogin();
    const login = await stored();
    expect(login.scope.split(' ')).toEqual(expect.arrayContaining(['mcp:platform', 'mcp:mail']));
    expect(login.scope.split(' ')).not.toContain('mcp:deals');
    const ok = await whoami();
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ email: alice.email, client_id: 'platform-cli' });
    // She also signs in to two other clients, approving their consent pages (a registered connector and one
    // known by its metadata document), and with a second sign-in of the CLI client.
    await approveConsent(connectorId, CONNECTOR, 'Claude connector');
    await approveConsent(cimdId, CIMD_REDIRECT, 'Meeting notes');
    const s1 = await signIn(idp.issuer, alice.sessionToken, { scope: 'openid email mcp:platform mcp:mail' });
    expect(s1.scope.split(' ')).toContain('mcp:mail');

    // Two sign-ins and two consents listed; revoke the other sign-in: it can no longer refresh, the user's
    // command line still works.
    await page.reload();
    await expect(page.locator('form[action*="/sign-ins/"]').count()).resolves.toBe(2);
    await expect(page.locator('form[action$="/consents/withdraw"]').count()).resolves.toBe(2);
    const consents = (await page.textContent('section:has(h2:text("Consents"))')) ?? '';
    expect(consents).toContain('Claude connector');
    expect(consents).toContain(cimdId);
    expect(consents).toContain('mail, platform');
    const f1 = await familyOf(s1.refresh_token);
    await submit(`form[action$="/sign-ins/${f1}/revoke"] button`);
    expect(await page.textContent('.flash')).toContain('The sign-in was revoked');
    expect((await refresh(idp.issuer, s1.refresh_token)).json).toMatchObject({ error: 'invalid_grant' });
    expect((await whoami()).code).toBe(0);
    await shot('user');

    // Ungrant mail: the user's live token is refused at the gateway within a second (the cut-off is per user);
    // her next call, a second after the cut-off, refreshes and goes through without mail.
    const beforeUngrant = (await stored()).access_token;
    await submit('form[action$="/ungrant"]:has(input[value="mail"]) button');
    expect(await page.textContent('.flash')).toContain('Ungranted mail');
    expect(await gatewayRefuses(beforeUngrant)).toBeLessThanOrEqual(1000);
    await sleep(1100);
    const narrowed = await whoami();
    expect(narrowed.stderr).toBe('');
    expect(narrowed.code).toBe(0);
    expect(JSON.parse(narrowed.stdout).scope.split(' ')).not.toContain('mcp:mail');
    const live = await stored();
    expect(live.access_token).not.toBe(beforeUngrant);
    expect(live.scope.split(' ')).not.toContain('mcp:mail');

    // Revoke all: the live token is refused at the gateway, the CLI's refresh is refused, and the user is told
    // to log in again.
    await submit('form[action$="/revoke-all"] button');
    expect(await page.textContent('.flash')).toContain('Revoked every token of alice.console@example.com');
    expect(await gatewayRefuses(live.access_token)).toBeLessThanOrEqual(1000);
    const refused = await whoami();
    expect(refused).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'platform: the sign-in is no longer valid (invalid_grant: refresh token is revoked): run `platform login`\n',
    });
    // The IdP agrees: /oauth/userinfo applies the gateways' revocation rule.
    const userinfo = await fetch(`${idp.issuer}/oauth/userinfo`, {
      headers: { authorization: `Bearer ${live.access_token}` },
    });
    expect(userinfo.status).toBe(401);
    expect((await refresh(idp.issuer, live.refresh_token)).json).toMatchObject({ error: 'invalid_grant' });
    expect(await page.textContent('body')).toContain('No live sign-ins.');

    // The admin audit says the console did it, as whom.
    const { rows } = await db.pool.query<{ action: string; actor_email: string; actor_client_id: string }>(
      `SELECT action, actor_email, actor_client_id FROM platform.admin_audit
        WHERE action IN ('grant', 'ungrant', 'revoke-sign-in', 'revoke-user') ORDER BY id`,
    );
    expect(rows.map((r) => r.action)).toEqual(['grant', 'grant', 'revoke-sign-in', 'ungrant', 'revoke-user']);
    for (const r of rows)
      expect(r).toMatchObject({ actor_email: root.email, actor_client_id: 'admin-console' });
    // The refused refreshes (the revoked sign-in's, the command line's after "revoke all", the test's own) are
    // in the audit, with whose they were.
    const refusals = await db.pool.query(
      `SELECT error, grant_type, client_id FROM platform.refusal_audit WHERE email = 'alice.console@example.com'`,
    );
    expect(refusals.rows).toEqual(
      Array(3).fill({ error: 'invalid_grant', grant_type: 'refresh_token', client_id: 'platform-cli' }),
    );

    // Exports of the current filter, downloaded by the browser.
    await page.goto(`${idp.issuer}/admin/audit?email=alice.console%40example.com`);
    await shot('audit-user');
    const [jsonl] = await Promise.all([page.waitForEvent('download'), page.click('a:text("JSON lines")')]);
    const lines = (await readFile(await jsonl.path(), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(jsonl.suggestedFilename()).toBe('audit.jsonl');
    expect(lines.filter((l) => l.event === 'issued').length).toBeGreaterThanOrEqual(3);
    expect(lines.some((l) => l.event === 'refused' && l.target === 'invalid_grant')).toBe(true);
    // Every administrator action that concerned her is in her audit, whatever its target names.
    const admin = 'root.admin@example.com';
    const actions = lines.filter((l) => l.email === admin).map((l) => l.event);
    for (const a of ['grant', 'ungrant', 'revoke-sign-in', 'revoke-user', 'read-user'])
      expect(actions).toContain(a);
    expect(lines.find((l) => l.event === 'revoke-user')).toMatchObject({ client_id: 'admin-console' });
    // Nothing about anyone else: her own rows, or an administrator's action on her.
    for (const l of lines) expect([admin, 'alice.console@example.com']).toContain(l.email);
    const [csv] = await Promise.all([page.waitForEvent('download'), page.click('a:text("CSV")')]);
    const text = await readFile(await csv.path(), 'utf8');
    expect(text.split('\r\n')[0]).toBe(
      'id,at,event,email,subject,client_id,grant_type,jti,scope,expires_at,target,detail,request_id',
    );
    expect(text).toContain(',issued,alice.console@example.com,');
  }, 90_000);

  it('shows the clients and the signing keys', async () => {
    const clients = await page.goto(`${idp.issuer}/admin/clients`);
    expectStrictPage(clients!.headers(), await clients!.text());
    const rows = await page.locator('table tbody tr').allTextContents();
    const row = (text: string) => rows.find((r) => r.includes(text)) ?? '';
    expect(row('platform-cli')).toBeTruthy();
    // Consent counts: the registered connector and the metadata-document client one each, the inspector none.
    expect(row(connectorId)).toContain('Claude connector');
    expect(row(connectorId)).toContain(CONNECTOR);
    expect(row(connectorId)).toMatch(/1$/);
    expect(row('MCP Inspector')).toMatch(/0$/);
    expect(row(cimdId)).toMatch(/1$/);
    await shot('clients');
    const keys = await page.goto(`${idp.issuer}/admin/keys`);
    expectStrictPage(keys!.headers(), await keys!.text());
    expect(await page.textContent('table')).toContain('signs tokens');
    await shot('keys');
  });

  it('refuses a forged form (no token, another session’s token, another origin) and changes nothing', async () => {
    const path = '/admin/users/alice.console%40example.com/grant';
    const grants = async () =>
      (await db.pool.query('SELECT count(*)::int AS n FROM platform.entitlement_grants')).rows[0].n as number;
    const before = await grants();
    const token = await csrfOf(root, '/admin/users/alice.console%40example.com');

    const none = await post(path, { service: 'crm' });
    expect(none.status).toBe(403);
    expect(none.text).toContain('not valid for this session');

    const other = await seedSession(root);
    const foreign = await csrfOf(other, '/admin/users/alice.console%40example.com');
    expect(foreign).not.toBe(token);
    expect((await post(path, { service: 'crm', csrf_token: foreign })).status).toBe(403);

    const cross = await post(path, { service: 'crm', csrf_token: token }, { 'sec-fetch-site': 'cross-site' });
    expect(cross.status).toBe(403);
    expect(cross.text).toContain('not sent from this console');
    expect(
      (await post(path, { service: 'crm', csrf_token: token }, { origin: 'http://evil.example' })).status,
    ).toBe(403);
    expect(await grants()).toBe(before);

    // The same form with this session's token, from this origin, goes through (303 back with a flash).
    const good = await post(path, { service: 'crm', csrf_token: token }, { 'sec-fetch-site': 'same-origin' });
    expect(good.status).toBe(303);
    expect(good.location).toMatch(/^\/admin\/users\/alice\.console%40example\.com\?flash=/);
    expect(await grants()).toBe(before + 1);
    // A flash line not signed by the server is not shown.
    const spoof = await fetch(`${idp.issuer}/admin/users/alice.console%40example.com?flash=Call+0800&sig=x`, {
      headers: { cookie: cookie(root) },
    });
    expect(await spoof.text()).not.toContain('Call 0800');
  });

  it('answers bad input with 400 and 404 pages, never 500', async () => {
    const cases: Array<[string, number, string]> = [
      ['/admin/audit?since=yesterday', 400, 'since must be an ISO 8601 date'],
      ['/admin/audit?since=2026-11-23T10:00&until=2026-11-22T10:00', 400, 'since must be before until'],
      ['/admin/audit?cursor=bm90LWEtY3Vyc29y', 400, 'cursor is not one this API gave out'],
      ['/admin/audit?service=..%2Fx', 400, 'is not a service name'],
      ['/admin/audit?email=' + 'a'.repeat(400), 400, 'email is too long'],
      ['/admin/audit.csv?colour=blue', 400, 'unknown parameter colour'],
      ['/admin/users/nobody%40example.com', 404, 'no user with the email nobody@example.com'],
      ['/admin/users/not-an-email', 400, 'must name an email address'],
      ['/admin/users/%E0%A4%A', 400, 'percent-encoding'],
      ['/admin/users?email=x', 400, 'email must be 2-320 characters'],
      ['/admin/nothing-here', 404, 'no route'],
    ];
    for (const [path, status, text] of cases) {
      const res = await fetch(`${idp.issuer}${path}`, { headers: { cookie: cookie(root) } });
      const body = await res.text();
      expect({ path, status: res.status }).toEqual({ path, status });
      expectStrictPage(Object.fromEntries(res.headers), body);
      expect(body).toContain(text.replace(/'/g, '&#39;'));
      expect(body).not.toMatch(/at .*\.ts:\d+/);
    }
    const unknownSignIn = await post('/admin/users/a%40b.c/sign-ins/not-a-uuid/revoke', {
      csrf_token: await csrfOf(root, '/admin/users/alice.console%40example.com'),
    });
    expect(unknownSignIn.status).toBe(303);
    expect(decodeURIComponent(unknownSignIn.location!)).toContain('kind=error');
    expect(
      (await fetch(`${idp.issuer}/admin/keys`, { method: 'DELETE', headers: { cookie: cookie(root) } }))
        .status,
    ).toBe(405);
  });
});

/** A second web session of the same user (another browser). */
async function seedSession(u: SeededUser): Promise<SeededUser> {
  const token = `s2-${u.sessionToken}`;
  await db.pool.query(
    `INSERT INTO sessions ("userId", expires, "sessionToken") VALUES ($1, now() + interval '1 hour', $2)`,
    [u.id, token],
  );
  return { ...u, sessionToken: token };
}
