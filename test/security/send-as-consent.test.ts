// An administrator's powers at a tool server through a third-party client, replayed against the real IdP,
// gateway and mail tool server: an administrator who approves a connector for `mail` no longer hands it
// send-as-anyone (send_as_forbidden), until the administrator approves `mail:send_as` itself on a consent page
// that names it in words. A non-admin never gets the scope; platform-cli keeps sending as others; a
// platform-cli device token (phishable, RFC 8628 §5.4) never does.
import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { decodeJwt } from 'jose';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../cli/support.ts';
import { registerClient } from '../helpers/clients.ts';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import {
  answerDevicePage,
  pageScopes,
  pollDevice,
  skipPollInterval,
  startDevice,
} from '../helpers/device.ts';
import { sendMailAs } from '../helpers/mail.ts';
import { authorizeRequest, exchangeCode, pkcePair, signIn } from '../helpers/oauth.ts';
import { toolJson } from '../tools/helpers.ts';
import { type Stack, startStack } from '../tools/stack.ts';

const REDIRECT = 'http://127.0.0.1:53682/callback';
const SEND_AS_WORDS = 'Send mail and create calendar events as any other user of the platform';

let stack: Stack;
let admin: SeededUser;
let user: SeededUser;
let connector: string;
let browser: Browser;

beforeAll(async () => {
  browser = await launchChromium();
  const adminEmail = `admin-${randomUUID().slice(0, 8)}@example.com`;
  stack = await startStack({ adminEmails: [adminEmail] });
  [admin, user] = await Promise.all([
    seedUser(stack.db.pool, { email: adminEmail }),
    seedUser(stack.db.pool),
  ]);
  const r = await registerClient(stack.idp.url, { client_name: 'Mail Connector', redirect_uris: [REDIRECT] });
  expect(r.status).toBe(201);
  connector = r.json.client_id;
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

/** The connector's authorization request for `who`, answered on the consent page when it is shown. */
function ask(who: SeededUser, scope: string, extra: Record<string, string> = {}, consent?: 'approve') {
  return authorizeRequest({
    issuer: stack.idp.issuer,
    sessionToken: who.sessionToken,
    consent,
    params: { client_id: connector, redirect_uri: REDIRECT, scope, ...extra },
  });
}

/** A consent answered with approve (when shown) and the code exchanged: the connector's tokens. */
async function connectorTokens(who: SeededUser, scope: string) {
  const r = await ask(who, scope, {}, 'approve');
  const code = r.location?.searchParams.get('code');
  if (!code) throw new Error(`no code: ${r.status} ${r.location} ${r.body.slice(0, 300)}`);
  const t = await exchangeCode(stack.idp.url, {
    code,
    verifier: r.verifier,
    redirectUri: REDIRECT,
    clientId: connector,
  });
  expect(t.status, t.text).toBe(200);
  return {
    page: 'consentPage' in r ? r.consentPage : undefined,
    tokens: t.json as { access_token: string; scope: string },
  };
}

function expectRefused(r: CallToolResult) {
  expect(r.isError).toBe(true);
  expect(toolJson(r)).toMatchObject({ error: { code: 'send_as_forbidden', status: 403 } });
}

function expectSentAs(r: CallToolResult, mailbox: string) {
  expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
  expect(toolJson(r)).toMatchObject({ from: mailbox, send_as: true });
}

const storedConsent = async (email: string) =>
  (
    await stack.db.pool.query(
      'SELECT services, scopes FROM platform.oauth_consents WHERE email = $1 AND client_id = $2',
      [email, connector],
    )
  ).rows[0];

describe('an administrator approves a connector for mail', () => {
  it('for mcp:mail only: the connector holding the admin’s token cannot send as another user', async () => {
    const { page, tokens } = await connectorTokens(admin, 'openid email mcp:mail');
    expect(pageScopes(page!).granted.map((g) => g.words)).not.toContain(SEND_AS_WORDS);
    expect(tokens.scope).toBe('openid email mcp:mail');
    expectRefused(await sendMailAs(stack.baseUrl, tokens.access_token, user.email));
    // Sending as the administrator (the token's own user) still works: only send-as is withheld.
    const own = await sendMailAs(stack.baseUrl, tokens.access_token, admin.email);
    expect(toolJson(own)).toMatchObject({ from: admin.email, send_as: false });
  });

  it('asking for mail:send_as later: prompt=none → consent_required, nothing stored', async () => {
    const r = await ask(admin, 'openid email mcp:mail mail:send_as', { prompt: 'none' });
    expect(r.status).toBe(302);
    expect(r.location!.searchParams.get('error')).toBe('consent_required');
    expect(r.location!.searchParams.get('code')).toBeNull();
    expect(await storedConsent(admin.email)).toEqual({ services: ['mail'], scopes: [] });
  });

  it('asking for it without prompt shows the page again, naming it in words; approved, send-as works', async () => {
    const { page, tokens } = await connectorTokens(admin, 'openid email mcp:mail mail:send_as');
    expect(page, 'the consent page was shown again').toBeDefined();
    const power = pageScopes(page!).granted.find((g) => g.scopes.includes('mail:send_as'));
    expect(power).toEqual({ words: SEND_AS_WORDS, scopes: ['mail:send_as'] });
    expect(page).toMatch(/<li class="power">/);
    expect(tokens.scope).toBe('openid email mcp:mail mail:send_as');
    expect(decodeJwt(tokens.access_token).scope).toBe(tokens.scope);
    expectSentAs(await sendMailAs(stack.baseUrl, tokens.access_token, user.email), user.email);
    expect(await storedConsent(admin.email)).toEqual({ services: ['mail'], scopes: ['mail:send_as'] });
    // Remembered: the next request for it gets its code without the page.
    const again = await ask(admin, 'openid email mcp:mail mail:send_as', { prompt: 'none' });
    expect(again.location!.searchParams.get('code')).toBeTruthy();
  });

  it('a non-admin asking for it is never shown it and never gets it', async () => {
    const { page, tokens } = await connectorTokens(user, 'openid email mcp:mail mail:send_as');
    expect(pageScopes(page!).granted.map((g) => g.scopes.join(' '))).toEqual(['openid email', 'mcp:mail']);
    expect(tokens.scope).toBe('openid email mcp:mail');
    expect(await storedConsent(user.email)).toEqual({ services: ['mail'], scopes: [] });
    expectRefused(await sendMailAs(stack.baseUrl, tokens.access_token, admin.email));
  });
});

describe('the first-party platform-cli', () => {
  it('signed in as the CLI does (every scope discovery lists): send-as works, as before', async () => {
    const meta = (await (await fetch(`${stack.idp.url}/.well-known/openid-configuration`)).json()) as {
      scopes_supported: string[];
    };
    expect(meta.scopes_supported).toContain('mail:send_as');
    const tokens = await signIn(stack.idp.issuer, admin.sessionToken, {
      scope: meta.scopes_supported.join(' '),
    });
    expect(tokens.scope.split(' ')).toEqual(expect.arrayContaining(['platform:admin', 'mail:send_as']));
    expectSentAs(await sendMailAs(stack.baseUrl, tokens.access_token, user.email), user.email);
  });

  it('a login from before mail:send_as existed (platform:admin, no mail:send_as) keeps sending as others', async () => {
    const tokens = await signIn(stack.idp.issuer, admin.sessionToken, {
      scope: 'openid email mcp:mail platform:admin',
    });
    expect(tokens.scope).toBe('openid email mcp:mail platform:admin');
    expectSentAs(await sendMailAs(stack.baseUrl, tokens.access_token, user.email), user.email);
  });

  it('a device-flow token never sends as others, whatever the device asked for', async () => {
    const d = await startDevice(stack.idp.issuer, {
      client_id: 'platform-cli',
      scope: 'openid email mcp:mail platform:admin mail:send_as',
    });
    const answer = await answerDevicePage(stack.idp.issuer, d, admin.sessionToken, 'approve');
    expect(answer.status).toBe(200);
    await skipPollInterval(stack.db.pool, d.device_code);
    const r = await pollDevice(stack.idp.issuer, d.device_code);
    expect(r.status, r.text).toBe(200);
    expect(r.json.scope).toBe('openid email mcp:mail');
    expectRefused(await sendMailAs(stack.baseUrl, r.json.access_token as string, user.email));
  });
});

describe('in Chromium', () => {
  it('the consent page names the send-as power in words, marked apart from the services', async () => {
    const context = await browser.newContext({ viewport: { width: 900, height: 900 } });
    try {
      await context.addCookies([
        { name: 'authjs.session-token', value: admin.sessionToken, url: stack.idp.url },
      ]);
      const page = await context.newPage();
      const u = new URL(`${stack.idp.url}/oauth/authorize`);
      for (const [k, v] of Object.entries({
        response_type: 'code',
        client_id: connector,
        redirect_uri: REDIRECT,
        scope: 'openid email mcp:mail mail:send_as',
        code_challenge: pkcePair().challenge,
        code_challenge_method: 'S256',
        state: 's',
        prompt: 'consent',
      }))
        u.searchParams.set(k, v);
      await page.goto(u.toString());
      const items = await page.locator('ul.services li').allInnerTexts();
      expect(items.map((t) => t.replace(/\s+/g, ' ').trim())).toEqual([
        'Know who you are: your account and your email address openid email',
        'Send mail and create calendar events as you, from your own mailbox mcp:mail',
        `${SEND_AS_WORDS} mail:send_as`,
      ]);
      expect(await page.locator('li.power').innerText()).toContain(SEND_AS_WORDS);
      const dir = join(tmpdir(), 'platform-idp-screenshots');
      await mkdir(dir, { recursive: true });
      await page.screenshot({ path: join(dir, 'consent-send-as.png'), fullPage: true });
    } finally {
      await context.close();
    }
  });
});
