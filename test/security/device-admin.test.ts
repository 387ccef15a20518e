// Device-code phishing (RFC 8628 §5.4), replayed against a real `platform idp`: an attacker starts a
// `platform-cli` device flow asking for `platform:admin` and sends the `verification_uri_complete` link to an
// administrator. The page names, in words, every scope the device will receive and what it asked for and will
// not get; one click no longer hands the attacker's poll an admin token — the admin API refuses it (403) — and
// the device code exchange leaves the administrative scopes out whatever the stored approval says.
import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { launchChromium } from '../cli/support.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import {
  answerDevicePage,
  type DeviceStart,
  openDevicePage,
  pageScopes,
  pollDevice,
  skipPollInterval,
  startDevice,
} from '../helpers/device.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const SCREENSHOTS = join(tmpdir(), 'platform-idp-screenshots');
const ATTACK_SCOPE = 'openid profile email mcp:platform mcp:mail platform:admin mail:send_as';

let db: TestDatabase;
let idp: IdpProcess;
let admin: SeededUser;
let browser: Browser;

beforeAll(async () => {
  [db, browser] = await Promise.all([createTestDatabase(), launchChromium()]);
  const adminEmail = `admin-${Date.now().toString(36)}@example.com`;
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_ADMIN_EMAILS: adminEmail, PLATFORM_SERVICES: 'platform,mail,deals' },
  });
  admin = await seedUser(db.pool, { email: adminEmail });
  await mkdir(SCREENSHOTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await idp?.stop();
  await db?.drop();
});

/** GET /admin/api/entitlements with the token: 200 for an admin token, 403 for any other valid one. */
const adminApi = (token: string) =>
  fetch(`${idp.url}/admin/api/entitlements`, { headers: { authorization: `Bearer ${token}` } });

/** The attacker's device flow, approved by the administrator on the page. */
async function phished(): Promise<DeviceStart> {
  const d = await startDevice(idp.issuer, { client_id: 'platform-cli', scope: ATTACK_SCOPE });
  const answer = await answerDevicePage(idp.issuer, d, admin.sessionToken, 'approve');
  expect(answer.status, answer.body).toBe(200);
  expect(answer.body).toContain('Device connected');
  return d;
}

async function exchange(d: DeviceStart) {
  await skipPollInterval(db.pool, d.device_code);
  const r = await pollDevice(idp.issuer, d.device_code);
  expect(r.status, r.text).toBe(200);
  return r.json as { access_token: string; refresh_token: string; scope: string };
}

describe('an attacker phishes an administrator with a platform-cli device code asking for platform:admin', () => {
  it('the page names every scope the device will receive in words, and what it asked for and will not get', async () => {
    const d = await startDevice(idp.issuer, { client_id: 'platform-cli', scope: ATTACK_SCOPE });
    const page = await openDevicePage(idp.issuer, d.verification_uri_complete, admin.sessionToken);
    expect(page.status).toBe(200);
    const { granted, withheld } = pageScopes(page.body);
    expect(granted).toEqual([
      {
        words: 'Know who you are: your account and your email address',
        scopes: ['openid', 'profile', 'email'],
      },
      { words: 'Use the platform tools as you (who you are signed in as)', scopes: ['mcp:platform'] },
      { words: 'Send mail and create calendar events as you, from your own mailbox', scopes: ['mcp:mail'] },
    ]);
    expect(withheld.map((w) => w.scopes)).toEqual([['platform:admin'], ['mail:send_as']]);
    expect(withheld[0]!.words).toMatch(/^Administer the platform/);
    expect(withheld[1]!.words).toBe('Send mail and create calendar events as any other user of the platform');
    expect(page.body).toContain('a device is never given');
  });

  it("one click: the attacker's poll gets a token without platform:admin, and the admin API refuses it (403)", async () => {
    const tokens = await exchange(await phished());
    expect(tokens.scope).toBe('openid profile email mcp:platform mcp:mail');
    const claims = decodeJwt(tokens.access_token);
    expect(claims).toMatchObject({ email: admin.email, client_id: 'platform-cli' });
    expect(String(claims.scope).split(' ')).not.toContain('platform:admin');
    expect(String(claims.scope).split(' ')).not.toContain('mail:send_as');
    const refused = await adminApi(tokens.access_token);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ error: 'insufficient_scope' });
    // The refresh token cannot widen back to it either.
    const refreshed = await refresh(idp.issuer, tokens.refresh_token);
    expect(refreshed.status, refreshed.text).toBe(200);
    expect(String(refreshed.json.scope).split(' ')).not.toContain('platform:admin');
    const widened = await refresh(idp.issuer, refreshed.json.refresh_token as string, 'platform-cli', {
      scope: 'openid platform:admin',
    });
    // Asked for on refresh, an administrative scope the grant lacks is dropped, never added.
    expect(widened.status, widened.text).toBe(200);
    expect(String(widened.json.scope).split(' ')).not.toContain('platform:admin');
    expect(String(decodeJwt(widened.json.access_token as string).scope).split(' ')).not.toContain(
      'platform:admin',
    );
  });

  it('the control: the same administrator signing in through platform-cli in the browser gets platform:admin (200)', async () => {
    const tokens = await signIn(idp.issuer, admin.sessionToken, { scope: 'openid platform:admin' });
    expect(tokens.scope).toBe('openid platform:admin');
    expect((await adminApi(tokens.access_token)).status).toBe(200);
  });

  it('the device code exchange leaves administrative scopes out whatever the stored approval says', async () => {
    const d = await phished();
    // An approval stored with them (an older provider's, or a row written behind the page's back).
    const planted = await db.pool.query(
      `UPDATE platform.device_codes SET granted_scope = granted_scope || ' platform:admin mail:send_as'
        WHERE device_code_hash = $1 RETURNING granted_scope`,
      [createHash('sha256').update(d.device_code).digest('base64url')],
    );
    expect(planted.rows.map((r) => r.granted_scope)).toEqual([
      'openid profile email mcp:platform mcp:mail platform:admin mail:send_as',
    ]);
    const tokens = await exchange(d);
    expect(tokens.scope).toBe('openid profile email mcp:platform mcp:mail');
    expect(String(decodeJwt(tokens.access_token).scope)).toBe(tokens.scope);
    expect((await adminApi(tokens.access_token)).status).toBe(403);
  });
});

describe('in Chromium', () => {
  it('the verification page reads every scope in words, the left-out powers struck through; Allow connects', async () => {
    const d = await startDevice(idp.issuer, { client_id: 'platform-cli', scope: ATTACK_SCOPE });
    const context = await browser.newContext({ viewport: { width: 900, height: 1000 } });
    try {
      await context.addCookies([{ name: 'authjs.session-token', value: admin.sessionToken, url: idp.url }]);
      const page = await context.newPage();
      await page.goto(d.verification_uri_complete);
      const granted = await page.locator('ul.services:not(.withheld) li').allInnerTexts();
      expect(granted.map((t) => t.replace(/\s+/g, ' ').trim())).toEqual([
        'Know who you are: your account and your email address openid profile email',
        'Use the platform tools as you (who you are signed in as) mcp:platform',
        'Send mail and create calendar events as you, from your own mailbox mcp:mail',
      ]);
      const withheld = page.locator('ul.withheld li');
      expect(await withheld.count()).toBe(2);
      expect(await withheld.first().innerText()).toMatch(/Administer the platform[\s\S]*platform:admin/);
      const struck = await withheld
        .first()
        .locator('.name')
        .evaluate((el) => el.computedStyleMap().get('text-decoration-line')?.toString());
      expect(struck).toBe('line-through');
      await page.screenshot({ path: join(SCREENSHOTS, 'device-phished.png'), fullPage: true });
      await page.getByRole('button', { name: 'Allow' }).click();
      await page.getByText('Device connected').waitFor();
    } finally {
      await context.close();
    }
    const tokens = await exchange(d);
    expect(tokens.scope.split(' ')).not.toContain('platform:admin');
  });
});
