// `platform login --device` as a user runs it on a machine without a browser: a real CLI process polling a real
// `platform idp`, and headless Chromium, signed in to the web application, approving on the verification page.
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { SeededUser, TestDatabase } from '../helpers/database.ts';
import { type IdpProcess, type RunningProcess, startPlatform } from '../helpers/processes.ts';
import { type ConfigHome, type LoginStack, startLoginStack } from './support.ts';

const CODE_LINE = /enter the code\s+([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})/;
const SCREENSHOTS = join(tmpdir(), 'platform-device-screens');

let stack: LoginStack;
let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;
let home: ConfigHome;

beforeAll(async () => {
  stack = await startLoginStack(inject('redisUrl'), 'Dana.Device@Example.com');
  ({ db, idp, user, home } = stack);
  await mkdir(SCREENSHOTS, { recursive: true });
});

afterAll(async () => {
  await stack?.stop();
});

async function startDeviceLogin(): Promise<{ p: RunningProcess; code: string }> {
  const p = startPlatform(['login', '--device'], { XDG_CONFIG_HOME: home.dir, PLATFORM_ISSUER: idp.issuer });
  await p.waitFor(/Waiting for approval/);
  return { p, code: CODE_LINE.exec(p.output())![1]! };
}

/** A browser signed in to the web application, on the verification page without the code. */
async function verificationPage(): Promise<Page> {
  const context = await stack.signedInContext();
  const page = await context.newPage();
  await page.goto(`${idp.issuer}/oauth/device`);
  return page;
}

/** Types the code as a person might (lower case, no hyphen) and returns the confirmation page. */
async function enterCode(page: Page, code: string, shot: string): Promise<void> {
  await page.screenshot({ path: join(SCREENSHOTS, `${shot}-entry.png`) });
  await page.fill('#user_code', code.replace('-', '').toLowerCase());
  await page.click('button[type=submit]');
  await page.waitForSelector('form[method=post]');
  await page.screenshot({ path: join(SCREENSHOTS, `${shot}-confirm.png`), fullPage: true });
}

describe('platform login --device', () => {
  it('prints the URL, the code and a QR code, polls, and stores the tokens once approved in Chromium', async () => {
    const { p, code } = await startDeviceLogin();
    const out = p.output();
    expect(out).toContain(`${idp.issuer}/oauth/device`);
    expect(out).toContain(`${idp.issuer}/oauth/device?user_code=${code}`);
    expect(out).toMatch(/[▀▄█]{10}/); // the QR code, in half-block characters

    const page = await verificationPage();
    expect(await page.textContent('h1')).toContain('Connect a device');
    await enterCode(page, code, 'approve');
    const body = (await page.textContent('main')) ?? '';
    expect(body).toContain('platform command-line client');
    expect(body).toContain(code);
    expect(body).toContain(user.email);
    expect(body).toContain('mcp:platform');
    await page.click('button[value=approve]');
    await page.waitForSelector('h1.done');
    await page.screenshot({ path: join(SCREENSHOTS, 'approve-done.png') });
    expect(await page.textContent('h1')).toBe('Device connected');

    expect(await p.exited).toBe(0);
    expect(p.output()).toContain(`Logged in to ${idp.issuer} as ${user.email}.`);
    const { readFile } = await import('node:fs/promises');
    const stored = JSON.parse(await readFile(home.credentials, 'utf8')) as {
      access_token: string;
      client_id: string;
    };
    expect(stored.client_id).toBe('platform-cli');
    expect(decodeJwt(stored.access_token)).toMatchObject({ email: user.email, sub: user.sub });
    await page.context().close();
  }, 60_000);

  it('exits 1 saying so when the user denies', async () => {
    const { p, code } = await startDeviceLogin();
    const page = await verificationPage();
    await enterCode(page, code, 'deny');
    await page.click('button[value=deny]');
    await page.waitForSelector('h1');
    await page.screenshot({ path: join(SCREENSHOTS, 'deny-done.png') });
    expect(await page.textContent('h1')).toBe('Request denied');
    expect(await p.exited).toBe(1);
    expect(p.output()).toContain('platform: the sign-in was denied on the verification page');
    await page.context().close();
  }, 60_000);

  it('exits 1 saying so when the code expires while it waits', async () => {
    const { p } = await startDeviceLogin();
    await db.pool.query(`UPDATE platform.device_codes SET expires_at = now() WHERE status = 'pending'`);
    expect(await p.exited).toBe(1);
    expect(p.output()).toContain('the code expired before it was approved');
  }, 60_000);
});
