// The console's entity-grant forms and signing-key rotation buttons, as an administrator uses them in headless
// Chromium against a real `platform idp` with PLATFORM_KEY_ROTATION=auto: what the forms change shows in the
// user's next token, in the published key set and in the audit. Screenshots go to docs/console/ with
// UPDATE_SCREENSHOTS=1, else to a temporary folder.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { launchChromium } from '../cli/support.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { sessionCookieName, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const SHOTS =
  process.env.UPDATE_SCREENSHOTS === '1'
    ? new URL('../../docs/console/', import.meta.url)
    : pathToFileURL(`${mkdtempSync(join(tmpdir(), 'platform-console-keys-'))}/`);

let db: TestDatabase;
let idp: IdpProcess;
let browser: Browser;
let page: Page;
let root: SeededUser;
let bob: SeededUser;

async function submit(selector: string): Promise<void> {
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}
const shot = (name: string) =>
  page.screenshot({ path: new URL(`${name}.png`, SHOTS).pathname, fullPage: true });
const jwksKids = async () =>
  (
    (await (await fetch(`${idp.issuer}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> }
  ).keys.map((k) => k.kid);

beforeAll(async () => {
  [db, browser] = await Promise.all([createTestDatabase(), launchChromium()]);
  root = await seedUser(db.pool, { email: 'root.keys@example.com' });
  bob = await seedUser(db.pool, { email: 'bob.deals@example.com' });
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: {
      PLATFORM_ADMIN_EMAILS: root.email,
      PLATFORM_OIDC_PRIVATE_KEY: '',
      PLATFORM_KEY_ROTATION: 'auto',
      PLATFORM_KEY_ENCRYPTION_KEY: 'console-test-key-encryption-secret-0123456789',
      PLATFORM_KEY_PUBLISH_AHEAD: '2h',
    },
  });
  const ctx = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  await ctx.addCookies([{ name: sessionCookieName(idp.issuer), value: root.sessionToken, url: idp.issuer }]);
  page = await ctx.newPage();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await idp?.stop();
  await db?.drop();
});

describe('entity grants in the console', () => {
  it('grants and ungrants an entity to the email and to a role; the token and the audit follow', async () => {
    await page.goto(`${idp.issuer}/admin/users/${encodeURIComponent(bob.email)}`);
    expect(await page.textContent('section:has(h2:text("Entity grants"))')).toContain('No entity grants.');

    await page.fill('#ent-entity', 'deal:4711');
    await page.selectOption('#ent-permission', 'write');
    await submit('form.entity-grant button');
    expect(await page.textContent('.flash')).toBe(`Granted write on deal:4711 to ${bob.email}.`);
    await page.fill('#ent-entity', 'deal:4712');
    await submit('form.entity-grant button');
    expect(await page.textContent('.flash')).toBe(`Granted read on deal:4712 to ${bob.email}.`);
    await page.fill('#ent-entity', 'deal:9');
    await page.fill('#ent-role', 'deal-team');
    await submit('form.entity-grant button');
    expect(await page.textContent('.flash')).toBe('Granted read on deal:9 to role deal-team.');
    const rows = await page.locator('section:has(h2:text("Entity grants")) tbody tr').allTextContents();
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(/deal:4711\s*write\s*to the email, by root\.keys@example\.com/);
    await shot('user-entity-grants');

    const t = await signIn(idp.issuer, bob.sessionToken);
    expect(decodeJwt(t.access_token).ent).toEqual({ 'deal:4711': ['write'], 'deal:4712': ['read'] });

    await submit('form[action$="/entity-ungrant"]:has(input[value="deal:4711"]) button');
    expect(await page.textContent('.flash')).toBe(
      `Ungranted write on deal:4711 from ${bob.email}; live tokens carrying it are cut.`,
    );
    const after = await signIn(idp.issuer, bob.sessionToken);
    expect(decodeJwt(after.access_token).ent).toEqual({ 'deal:4712': ['read'] });

    // Bad input is a flash on the page, not an error page.
    await page.fill('#ent-entity', 'not an entity!');
    await submit('form.entity-grant button');
    expect(await page.textContent('.flash.error')).toContain('entity must be 1-200 characters');

    const audit = await db.pool.query<{ action: string; target: string; actor_client_id: string }>(
      `SELECT action, target, actor_client_id FROM platform.admin_audit WHERE action IN ('grant', 'ungrant') ORDER BY id`,
    );
    expect(audit.rows).toEqual([
      { action: 'grant', target: `entity:deal:4711:${bob.email}`, actor_client_id: 'admin-console' },
      { action: 'grant', target: `entity:deal:4712:${bob.email}`, actor_client_id: 'admin-console' },
      { action: 'grant', target: 'entity:deal:9:role:deal-team', actor_client_id: 'admin-console' },
      { action: 'ungrant', target: `entity:deal:4711:${bob.email}`, actor_client_id: 'admin-console' },
    ]);
  });
});

describe('signing keys in the console', () => {
  it('rotates (planned), then withdraws every key in an emergency, after a confirmation', async () => {
    await page.goto(`${idp.issuer}/admin/keys`);
    const first = (await jwksKids())[0]!;
    expect(await page.textContent('table')).toContain('signs tokens');

    await submit('form[action="/admin/keys/rotate"] button');
    expect(await page.textContent('.flash')).toMatch(
      /^Key \S+ published; it signs from \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.$/,
    );
    expect(await page.textContent('table')).toContain('next: published, signs later');
    expect(await jwksKids()).toHaveLength(2);
    const t = await signIn(idp.issuer, bob.sessionToken);
    expect(decodeProtectedHeader(t.access_token).kid).toBe(first);

    // The browser will not send the emergency form unticked.
    const before = page.url();
    await page.click('form[action="/admin/keys/rotate-emergency"] button');
    expect(page.url()).toBe(before);
    expect(await jwksKids()).toHaveLength(2);

    await page.check('form[action="/admin/keys/rotate-emergency"] input[name="confirm"]');
    await submit('form[action="/admin/keys/rotate-emergency"] button');
    expect(await page.textContent('.flash')).toMatch(
      /^Key \S+ signs now; withdrawn: .+\. Their tokens are refused; clients refresh\.$/,
    );
    const kids = await jwksKids();
    expect(kids).toHaveLength(1);
    expect(kids).not.toContain(first);
    expect(await page.locator('table .badge.refused').count()).toBe(2);
    await shot('keys-rotation');
    const res = await fetch(`${idp.issuer}/oauth/userinfo`, {
      headers: { authorization: `Bearer ${t.access_token}` },
    });
    expect(res.status).toBe(401);
    const withdrawn = await db.pool.query(
      `SELECT count(*)::int AS n FROM platform.admin_audit WHERE action = 'key-withdrawn' AND actor_client_id = 'admin-console'`,
    );
    expect(withdrawn.rows[0].n).toBe(2);
  });
});
