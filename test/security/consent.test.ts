// Consent (every client but platform-cli): the attacks it stops, replayed. A freshly registered client cannot
// get a code silently; the page's form cannot be forged across sites or sessions; nothing it reflects runs;
// and a person in Chromium sees, approves and denies it.
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { launchChromium } from '../cli/support.ts';
import { registerClient, startCallbackServer } from '../helpers/clients.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { answerConsent, authorizeRequest, exchangeCode, parseConsentForm } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const SCREENSHOTS = join(tmpdir(), 'platform-idp-screenshots');

let db: TestDatabase;
let idp: IdpProcess;
let alice: SeededUser;
let bob: SeededUser;
let browser: Browser;
let callback: Awaited<ReturnType<typeof startCallbackServer>>;

beforeAll(async () => {
  [db, browser, callback] = await Promise.all([
    createTestDatabase(),
    launchChromium(),
    startCallbackServer(),
  ]);
  idp = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl') });
  alice = await seedUser(db.pool);
  bob = await seedUser(db.pool);
  await mkdir(SCREENSHOTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await callback?.close();
  await idp?.stop();
  await db?.drop();
});

const redirectUri = () => `http://127.0.0.1:${callback.port}/oauth/callback`;

async function newClient(name = 'Inspector') {
  const r = await registerClient(idp.url, { client_name: name, redirect_uris: [redirectUri()] });
  expect(r.status).toBe(201);
  return r.json.client_id;
}

const codesOf = async (clientId: string) =>
  Number(
    (await db.pool.query('SELECT count(*) AS n FROM platform.oauth_codes WHERE client_id = $1', [clientId]))
      .rows[0].n,
  );

const ask = (user: SeededUser, clientId: string, params: Record<string, string | undefined> = {}) =>
  authorizeRequest({
    issuer: idp.issuer,
    sessionToken: user.sessionToken,
    params: { client_id: clientId, redirect_uri: redirectUri(), scope: 'openid mcp:mail', ...params },
  });

describe('a freshly registered client gets no code without the user', () => {
  it('prompt=none → consent_required (with state and iss), and no code is stored', async () => {
    const clientId = await newClient();
    const r = await ask(alice, clientId, { prompt: 'none' });
    expect(r.status).toBe(302);
    expect(r.location!.searchParams.get('error')).toBe('consent_required');
    expect(r.location!.searchParams.get('state')).toBe(r.params.state);
    expect(r.location!.searchParams.get('iss')).toBe(idp.issuer);
    expect(r.location!.searchParams.get('code')).toBeNull();
    expect(await codesOf(clientId)).toBe(0);
  });

  it('without prompt → the consent page (200, no Location), still no code', async () => {
    const clientId = await newClient('Fresh Client');
    const r = await ask(alice, clientId);
    expect(r.status).toBe(200);
    expect(r.location).toBeUndefined();
    expect(r.res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(r.body).toContain('Fresh Client');
    expect(r.body).toContain(`127.0.0.1:${callback.port}`);
    expect(r.body).toContain('mcp:mail');
    expect(await codesOf(clientId)).toBe(0);
  });

  it('platform-cli is the one client that is never asked', async () => {
    const r = await authorizeRequest({ issuer: idp.issuer, sessionToken: alice.sessionToken });
    expect(r.status).toBe(302);
    expect(r.location!.searchParams.get('code')).toBeTruthy();
  });
});

describe('consent is remembered per (user, client) with the services approved', () => {
  it('approve → code; again → code at once; more services → page for the union; subset → none', async () => {
    const clientId = await newClient();
    const first = await authorizeRequest({
      issuer: idp.issuer,
      sessionToken: alice.sessionToken,
      consent: 'approve',
      params: { client_id: clientId, redirect_uri: redirectUri(), scope: 'openid mcp:mail' },
    });
    expect(first.consentShown).toBe(true);
    expect(first.status).toBe(302);
    const code = first.location!.searchParams.get('code')!;
    expect(first.location!.searchParams.get('state')).toBe(first.params.state);
    expect(first.location!.searchParams.get('iss')).toBe(idp.issuer);
    const tokens = await exchangeCode(idp.url, {
      code,
      verifier: first.verifier,
      redirectUri: redirectUri(),
      clientId,
    });
    expect(tokens.status).toBe(200);
    expect(tokens.json.scope).toBe('openid mcp:mail');

    const again = await ask(alice, clientId);
    expect(again.status).toBe(302);
    expect(again.location!.searchParams.get('code')).toBeTruthy();
    const silent = await ask(alice, clientId, { prompt: 'none' });
    expect(silent.location!.searchParams.get('code')).toBeTruthy();

    // Another user has not approved anything.
    expect((await ask(bob, clientId)).status).toBe(200);

    const more = await ask(alice, clientId, { scope: 'openid mcp:mail mcp:deals' });
    expect(more.status).toBe(200);
    expect(more.body).toContain('mcp:deals');
    expect(
      (await ask(alice, clientId, { scope: 'openid mcp:deals', prompt: 'none' })).location!.searchParams.get(
        'error',
      ),
    ).toBe('consent_required');
    const approved = await answerConsent({
      url: `${idp.url}/oauth/authorize`,
      html: more.body,
      sessionToken: alice.sessionToken,
      cookieName: 'authjs.session-token',
      decision: 'approve',
    });
    expect(approved.location!.searchParams.get('code')).toBeTruthy();
    const { rows } = await db.pool.query(
      'SELECT services FROM platform.oauth_consents WHERE email = $1 AND client_id = $2',
      [alice.email, clientId],
    );
    expect(rows[0].services).toEqual(['deals', 'mail']);

    const subset = await ask(alice, clientId, { scope: 'openid mcp:deals' });
    expect(subset.status).toBe(302);
    expect(subset.location!.searchParams.get('code')).toBeTruthy();

    const forced = await ask(alice, clientId, { prompt: 'consent' });
    expect(forced.status).toBe(200);
    expect(parseConsentForm(forced.body)).toBeDefined();
  });

  it('deny → access_denied with state and iss, no code, nothing stored', async () => {
    const clientId = await newClient();
    const r = await authorizeRequest({
      issuer: idp.issuer,
      sessionToken: alice.sessionToken,
      consent: 'deny',
      params: { client_id: clientId, redirect_uri: redirectUri() },
    });
    expect(r.status).toBe(302);
    expect(r.location!.searchParams.get('error')).toBe('access_denied');
    expect(r.location!.searchParams.get('state')).toBe(r.params.state);
    expect(r.location!.searchParams.get('iss')).toBe(idp.issuer);
    expect(r.location!.searchParams.get('code')).toBeNull();
    expect(await codesOf(clientId)).toBe(0);
    const { rowCount } = await db.pool.query('SELECT 1 FROM platform.oauth_consents WHERE client_id = $1', [
      clientId,
    ]);
    expect(rowCount).toBe(0);
  });
});

describe('CSRF: the approve POST counts only with the token of this session', () => {
  const post = async (page: string, user: SeededUser, override: Record<string, string | undefined>) =>
    answerConsent({
      url: `${idp.url}/oauth/authorize`,
      html: page,
      sessionToken: user.sessionToken,
      cookieName: 'authjs.session-token',
      decision: 'approve',
      override,
    });

  const cases: Array<
    [string, (ctx: { bobsToken: string; otherClientToken: string }) => Record<string, string | undefined>]
  > = [
    ['without a token', () => ({ csrf_token: undefined })],
    ['with a wrong token', () => ({ csrf_token: 'A'.repeat(43) })],
    ["with another session's token", (c) => ({ csrf_token: c.bobsToken })],
    ["with another client's token", (c) => ({ csrf_token: c.otherClientToken })],
  ];
  for (const [name, override] of cases) {
    it(`${name} → 403 page, no redirect, no code, no consent stored`, async () => {
      const clientId = await newClient();
      const other = await newClient();
      const alicePage = (await ask(alice, clientId)).body;
      const bobsToken = parseConsentForm((await ask(bob, clientId)).body)!.fields.get('csrf_token')!;
      const otherClientToken = parseConsentForm((await ask(alice, other)).body)!.fields.get('csrf_token')!;
      const r = await post(alicePage, alice, override({ bobsToken, otherClientToken }));
      expect(r.status).toBe(403);
      expect(r.location).toBeUndefined();
      expect(r.body).toContain('not valid for this session');
      expect(await codesOf(clientId)).toBe(0);
      expect(
        (await db.pool.query('SELECT 1 FROM platform.oauth_consents WHERE client_id = $1', [clientId]))
          .rowCount,
      ).toBe(0);
    });
  }

  it('the same form with its own token is accepted (the control)', async () => {
    const clientId = await newClient();
    const r = await post((await ask(alice, clientId)).body, alice, {});
    expect(r.status).toBe(302);
    expect(r.location!.searchParams.get('code')).toBeTruthy();
  });

  it('a POST without a session is refused, and a deny cannot be forged either', async () => {
    const clientId = await newClient();
    const page = (await ask(alice, clientId)).body;
    const noSession = await post(page, { ...alice, sessionToken: 'nobody' }, {});
    expect(noSession.status).toBe(403);
    expect(noSession.location).toBeUndefined();
    const forgedDeny = await answerConsent({
      url: `${idp.url}/oauth/authorize`,
      html: page,
      sessionToken: alice.sessionToken,
      cookieName: 'authjs.session-token',
      decision: 'deny',
      override: { csrf_token: 'forged' },
    });
    expect(forgedDeny.status).toBe(403);
    expect(forgedDeny.location).toBeUndefined();
  });
});

const XSS_NAME = `<script>alert("name")</script><img src=x onerror=alert(1)>"'&`;
const XSS_STATE = `"><script>alert("state")</script><b x='`;

describe('everything the page reflects is escaped', () => {
  it('client_name, state, nonce and resource-like values arrive as text, never as markup', async () => {
    const clientId = await newClient(XSS_NAME);
    const r = await ask(alice, clientId, {
      state: XSS_STATE,
      nonce: `</form><form action="https://evil.example">`,
    });
    expect(r.status).toBe(200);
    expect(r.body).not.toContain('<script>');
    expect(r.body).not.toContain('<img');
    expect(r.body).not.toContain('<b x=');
    expect(r.body).not.toContain('action="https://evil.example"');
    expect(r.body).toContain('&#60;script&#62;alert(&#34;name&#34;)&#60;/script&#62;');
    // The form carries the values back unchanged (escaping is only the page's encoding).
    const form = parseConsentForm(r.body)!;
    expect(form.fields.get('state')).toBe(XSS_STATE);
  });

  it('the refused page escapes what it reflects (a parameter name in the error)', async () => {
    const name = '<script>alert(1)</script>';
    const q = `${encodeURIComponent(name)}=1&${encodeURIComponent(name)}=2`;
    const res = await fetch(`${idp.url}/oauth/authorize?${q}`, { redirect: 'manual' });
    const body = await res.text();
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(body).toContain('&#60;script&#62;alert(1)&#60;/script&#62;');
    expect(body).not.toContain(name);
  });

  it('an unknown scope is never reflected: it is dropped (issue 18), and the page names only what is granted', async () => {
    const clientId = await newClient();
    const r = await ask(alice, clientId, { scope: 'openid <script>alert(1)</script>' });
    expect(r.status).toBe(200);
    expect(r.body).not.toContain('<script>alert(1)');
  });

  it('a scope with a character RFC 6749 §3.3 forbids goes back as invalid_scope, unreflected', async () => {
    const clientId = await newClient();
    const r = await ask(alice, clientId, { scope: 'openid "<script>alert(1)</script>' });
    expect(r.status).toBe(302);
    expect(r.location!.searchParams.get('error')).toBe('invalid_scope');
    expect(r.location!.searchParams.get('error_description')).not.toContain('<script>');
  });
});

describe('in Chromium', () => {
  async function inBrowser(user: SeededUser, run: (page: import('playwright-core').Page) => Promise<void>) {
    const context = await browser.newContext({ viewport: { width: 900, height: 760 } });
    try {
      await context.addCookies([{ name: 'authjs.session-token', value: user.sessionToken, url: idp.url }]);
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('dialog', (d) => {
        problems.push(`dialog: ${d.message()}`);
        void d.dismiss();
      });
      page.on('console', (m) => {
        // A 4xx navigation is logged as "Failed to load resource"; anything else (a CSP refusal) is a problem.
        if (m.type() === 'error' && !m.text().startsWith('Failed to load resource'))
          problems.push(`console: ${m.text()}`);
      });
      await run(page);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }

  const authorizeUrl = (clientId: string, extra: Record<string, string> = {}) => {
    const u = new URL(`${idp.url}/oauth/authorize`);
    const p = {
      response_type: 'code',
      client_id: clientId,
      redirect_uri: redirectUri(),
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      state: 'st-123',
      scope: 'openid email mcp:mail mcp:deals',
      ...extra,
    };
    for (const [k, v] of Object.entries(p)) u.searchParams.set(k, v);
    return u.href;
  };

  it('shows the client, its host and the services; Allow lands on the callback with a code', async () => {
    const clientId = await newClient('MCP Inspector');
    await inBrowser(alice, async (page) => {
      await page.goto(authorizeUrl(clientId));
      await expect(page.locator('h1').textContent()).resolves.toContain('MCP Inspector');
      const text = (await page.textContent('main')) ?? '';
      expect(text).toContain(`127.0.0.1:${callback.port}`);
      expect(text).toContain(alice.email);
      expect(text).toContain('mcp:deals');
      await page.screenshot({ path: join(SCREENSHOTS, 'consent.png'), fullPage: true });
      const since = callback.hits.length;
      await page.getByRole('button', { name: 'Allow' }).click();
      const hit = await callback.next(since);
      expect(hit.pathname).toBe('/oauth/callback');
      expect(hit.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(hit.searchParams.get('state')).toBe('st-123');
      await page.waitForURL(/127\.0\.0\.1:\d+\/oauth\/callback/);
    });
  });

  it('Deny lands on the callback with access_denied', async () => {
    const clientId = await newClient('Some Connector');
    await inBrowser(bob, async (page) => {
      await page.goto(authorizeUrl(clientId));
      const since = callback.hits.length;
      await page.getByRole('button', { name: 'Deny' }).click();
      const hit = await callback.next(since);
      expect(hit.searchParams.get('error')).toBe('access_denied');
      expect(hit.searchParams.get('state')).toBe('st-123');
      expect(hit.searchParams.get('iss')).toBe(idp.issuer);
      expect(hit.searchParams.get('code')).toBeNull();
    });
  });

  it('a hostile client_name and state render as text and run nothing', async () => {
    const clientId = await newClient(XSS_NAME);
    await inBrowser(alice, async (page) => {
      await page.goto(authorizeUrl(clientId, { state: XSS_STATE }));
      expect(await page.locator('h1 .client').textContent()).toBe(XSS_NAME);
      expect(await page.locator('script').count()).toBe(0);
      expect(await page.locator('img').count()).toBe(0);
      expect(await page.locator('input[name="state"]').inputValue()).toBe(XSS_STATE);
      await page.screenshot({ path: join(SCREENSHOTS, 'consent-hostile-name.png'), fullPage: true });
    });
  });

  it('the refused-request page (unregistered redirect_uri) reads as a page, not a stack trace', async () => {
    const clientId = await newClient();
    await inBrowser(alice, async (page) => {
      const res = await page.goto(authorizeUrl(clientId, { redirect_uri: 'https://evil.example/cb' }));
      expect(res!.status()).toBe(400);
      expect(await page.textContent('h1')).toContain('refused');
      await page.screenshot({ path: join(SCREENSHOTS, 'refused.png'), fullPage: true });
    });
  });
});
