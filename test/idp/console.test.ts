// The admin console at /admin, as an administrator uses it: a real `platform idp` (managed entitlements), the
// web application's session cookie, headless Chromium. One browser and one IdP for the file. The screenshots
// in docs/console/ are taken here.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { launchChromium } from '../cli/support.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { refresh, sessionCookieName, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const SHOTS = new URL('../../docs/console/', import.meta.url);

let db: TestDatabase;
let idp: IdpProcess;
let browser: Browser;
let root: SeededUser;
let alice: SeededUser;
let admin: BrowserContext;
let page: Page;

const cookie = (u: SeededUser) => `${sessionCookieName(idp.issuer)}=${u.sessionToken}`;
const hash = (t: string) => createHash('sha256').update(t).digest('base64url');
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

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: new URL(`${name}.png`, SHOTS).pathname, fullPage: true });
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

beforeAll(async () => {
  [db, browser] = await Promise.all([createTestDatabase(), launchChromium()]);
  root = await seedUser(db.pool, { email: 'Root.Admin@Example.com' });
  alice = await seedUser(db.pool, { email: 'alice.console@example.com' });
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_ADMIN_EMAILS: root.email, PLATFORM_ENTITLEMENTS: 'managed' },
  });
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
  admin = await contextFor(root);
  page = await admin.newPage();
});

afterAll(async () => {
  await browser?.close();
  await idp?.stop();
  await db?.drop();
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

    const c = await contextFor(alice);
    const p = await c.newPage();
    await p.goto(`${idp.issuer}/admin`);
    await p.screenshot({ path: new URL('forbidden.png', SHOTS).pathname, fullPage: true });
    await c.close();
  });

  it('finds a user, grants and ungrants a service, revokes a sign-in and then the user; exports the audit', async () => {
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

    // Managed entitlements: grant mail; the next token carries it (and not deals, never granted).
    await submit('form[action$="/grant"]:has(input[value="mail"]) button');
    expect(await page.textContent('.flash')).toContain('Granted mail to alice.console@example.com');
    const s1 = await signIn(idp.issuer, alice.sessionToken, { scope: 'openid email mcp:mail mcp:deals' });
    const s2 = await signIn(idp.issuer, alice.sessionToken, { scope: 'openid email mcp:mail' });
    expect(s1.scope.split(' ')).toContain('mcp:mail');
    expect(s1.scope.split(' ')).not.toContain('mcp:deals');

    // Two sign-ins listed; revoke the first: it can no longer refresh, the second still can.
    await page.reload();
    await expect(page.locator('form[action*="/sign-ins/"]').count()).resolves.toBe(2);
    const f1 = await familyOf(s1.refresh_token);
    await submit(`form[action$="/sign-ins/${f1}/revoke"] button`);
    expect(await page.textContent('.flash')).toContain('The sign-in was revoked');
    expect((await refresh(idp.issuer, s1.refresh_token)).json).toMatchObject({ error: 'invalid_grant' });
    const r2 = await refresh(idp.issuer, s2.refresh_token);
    expect(r2.status).toBe(200);
    await shot('user');

    // Ungrant mail: the next refresh no longer carries it.
    await submit('form[action$="/ungrant"]:has(input[value="mail"]) button');
    expect(await page.textContent('.flash')).toContain('Ungranted mail');
    const r3 = await refresh(idp.issuer, (r2.json as { refresh_token: string }).refresh_token);
    expect(r3.status).toBe(200);
    const after = r3.json as { access_token: string; refresh_token: string; scope: string };
    expect(after.scope.split(' ')).not.toContain('mcp:mail');

    // Revoke all: the user's live access token is refused where tokens are checked, the sign-in is over. (A
    // fresh sign-in a second after the ungrant's cut-off, which covers tokens issued up to its second.)
    await new Promise((r) => setTimeout(r, 1100));
    const live = await signIn(idp.issuer, alice.sessionToken, { scope: 'openid email' });
    const bearer = { authorization: `Bearer ${live.access_token}` };
    expect((await fetch(`${idp.issuer}/oauth/userinfo`, { headers: bearer })).status).toBe(200);
    await submit('form[action$="/revoke-all"] button');
    expect(await page.textContent('.flash')).toContain('Revoked every token of alice.console@example.com');
    expect((await fetch(`${idp.issuer}/oauth/userinfo`, { headers: bearer })).status).toBe(401);
    expect((await refresh(idp.issuer, live.refresh_token)).json).toMatchObject({ error: 'invalid_grant' });
    expect(await page.textContent('body')).toContain('No live sign-ins.');

    // The admin audit says the console did it, as whom.
    const { rows } = await db.pool.query<{ action: string; actor_email: string; actor_client_id: string }>(
      `SELECT action, actor_email, actor_client_id FROM platform.admin_audit
        WHERE action IN ('grant', 'ungrant', 'revoke-sign-in', 'revoke-user') ORDER BY id`,
    );
    expect(rows.map((r) => r.action)).toEqual(['grant', 'revoke-sign-in', 'ungrant', 'revoke-user']);
    for (const r of rows)
      expect(r).toMatchObject({ actor_email: root.email, actor_client_id: 'admin-console' });
    // The refused refresh is in the audit, with whose it was.
    const refusals = await db.pool.query(
      `SELECT error, grant_type FROM platform.refusal_audit WHERE email = 'alice.console@example.com'`,
    );
    expect(refusals.rows).toContainEqual({ error: 'invalid_grant', grant_type: 'refresh_token' });

    // Exports of the current filter, downloaded by the browser.
    await page.goto(`${idp.issuer}/admin/audit?email=alice.console%40example.com`);
    const [jsonl] = await Promise.all([page.waitForEvent('download'), page.click('a:text("JSON lines")')]);
    const lines = (await readFile(await jsonl.path(), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(jsonl.suggestedFilename()).toBe('audit.jsonl');
    expect(lines.filter((l) => l.event === 'issued').length).toBeGreaterThanOrEqual(3);
    expect(lines.some((l) => l.event === 'refused' && l.target === 'invalid_grant')).toBe(true);
    expect(lines.some((l) => l.event === 'revoke-user' && l.client_id === 'admin-console')).toBe(true);
    for (const l of lines)
      expect([l.email, l.target]).toContain(
        l.event.startsWith('revoke-sign') ? l.target : 'alice.console@example.com',
      );
    const [csv] = await Promise.all([page.waitForEvent('download'), page.click('a:text("CSV")')]);
    const text = await readFile(await csv.path(), 'utf8');
    expect(text.split('\r\n')[0]).toBe(
      'id,at,event,email,subject,client_id,grant_type,jti,scope,expires_at,target,detail,request_id',
    );
    expect(text).toContain(',issued,alice.console@example.com,');
  });

  it('shows the clients and the signing keys', async () => {
    const clients = await page.goto(`${idp.issuer}/admin/clients`);
    expectStrictPage(clients!.headers(), await clients!.text());
    expect(await page.textContent('table')).toContain('platform-cli');
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
