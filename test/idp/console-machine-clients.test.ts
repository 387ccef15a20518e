// The console's machine clients page in headless Chromium, against the real IdP, gateway and tool servers: an
// administrator registers a machine client through the form, the client gets a token and calls through the
// gateway, the page shows it live with its last token and links to its audit, a bad form comes back as an error
// line, and Revoke cuts its token at the gateway within 1 s. The screenshot goes to docs/console/ with
// UPDATE_SCREENSHOTS=1, else to a temporary folder.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../cli/support.ts';
import { type ReplayStack, startReplayStack } from '../helpers/client-replay.ts';
import { seedUser } from '../helpers/database.ts';
import { gatewayStatus, type MachineKey, newMachineKey } from '../helpers/machine-clients.ts';
import { sessionCookieName } from '../helpers/oauth.ts';

const SHOTS =
  process.env.UPDATE_SCREENSHOTS === '1'
    ? new URL('../../docs/console/', import.meta.url)
    : pathToFileURL(`${mkdtempSync(join(tmpdir(), 'platform-console-mc-'))}/`);
const ADMIN = `mcc-admin-${crypto.randomUUID().slice(0, 8)}@example.com`;

let r: ReplayStack;
let browser: Browser;
let page: Page;
let key: MachineKey;
let ciEmail: string;

beforeAll(async () => {
  r = await startReplayStack({ idpEnv: { PLATFORM_ADMIN_EMAILS: ADMIN } });
  const admin = await seedUser(r.stack.db.pool, { email: ADMIN });
  ciEmail = (await seedUser(r.stack.db.pool, { email: `ci-${crypto.randomUUID().slice(0, 8)}@example.com` }))
    .email;
  key = await newMachineKey();
  browser = await launchChromium();
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  await context.addCookies([{ name: sessionCookieName(r.issuer), value: admin.sessionToken, url: r.issuer }]);
  page = await context.newPage();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await r?.stop();
});

const flash = () => page.textContent('.flash');

describe('console: machine clients', () => {
  it('register through the form, see it live with its last token and audit, revoke it: cut at the gateway within 1 s', async () => {
    await page.goto(`${r.issuer}/admin/machine-clients`);
    expect(await page.textContent('main')).toContain('No machine client is registered');
    expect(await page.getAttribute('nav a.here', 'href')).toBe('/admin/machine-clients');

    // A form without a service: the admin API's refusal comes back as an error line, nothing registered.
    await page.fill('#mc-name', 'nightly CI');
    await page.fill('#mc-email', ciEmail);
    await page.fill('#mc-jwks', JSON.stringify(key.jwks));
    await page.click('button.primary');
    expect(await page.getAttribute('.flash', 'class')).toContain('error');
    expect(await flash()).toMatch(/services must be a non-empty array/);

    await page.fill('#mc-name', 'nightly CI');
    await page.fill('#mc-email', ciEmail);
    await page.fill('#mc-jwks', JSON.stringify(key.jwks));
    await page.check('input[name=service_platform]');
    await page.check('input[name=service_deals]');
    await page.click('button.primary');
    const registered = (await flash()) ?? '';
    const clientId = /client_id is (mc-[A-Za-z0-9_-]+)/.exec(registered)?.[1];
    expect(clientId, registered).toBeDefined();

    const t = await key.token(r.issuer, clientId!);
    expect(t.status, t.text).toBe(200);
    expect(t.json.scope).toBe('mcp:platform mcp:deals');
    const token = String(t.json.access_token);
    expect(await gatewayStatus(r.serverUrl('platform'), token)).toBe(200);

    await page.goto(`${r.issuer}/admin/machine-clients`);
    const row = page.locator('tr', { hasText: clientId! });
    expect(await row.textContent()).toContain(ciEmail);
    expect(await row.textContent()).toContain('platform, deals');
    expect(await row.locator('.badge').textContent()).toBe('live');
    expect(await row.locator('td').nth(5).textContent()).toMatch(/^\d{4}-\d{2}-\d{2} /);
    await page.screenshot({ path: fileURLToPath(new URL('machine-clients.png', SHOTS)), fullPage: true });

    await row.locator('a', { hasText: 'Audit' }).click();
    expect(page.url()).toContain(`client_id=${encodeURIComponent(clientId!)}`);
    expect(await page.textContent('main')).toContain('client_credentials');

    await page.goto(`${r.issuer}/admin/machine-clients`);
    await page.locator('tr', { hasText: clientId! }).locator('button', { hasText: 'Revoke' }).click();
    expect(await flash()).toContain(`Revoked machine client ${clientId}`);
    await expect
      .poll(() => gatewayStatus(r.serverUrl('platform'), token), { timeout: 1000, interval: 50 })
      .toBe(401);
    expect(await page.locator('tr', { hasText: clientId! }).locator('.badge').textContent()).toBe('revoked');
    expect(await page.locator('tr', { hasText: clientId! }).locator('button').count()).toBe(0);
    expect((await key.token(r.issuer, clientId!)).json.error).toBe('invalid_client');
  });
});
