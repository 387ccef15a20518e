// The README's five-minute walk-through, done as a newcomer does it: a fresh checkout, the system Node 20 first
// on PATH, `make dev` in one terminal, and in another the lines its banner prints, run as printed — sign-in in
// a real browser, `platform tools`, `platform call`, `platform admin revoke-token` and `revoke-user` (the next
// call refused at once), `make dev` stopped with Ctrl-C and started again (still refused), `platform logout`.
//
// Nothing is exported by hand. The environment below is the harness's own isolation, not a user's settings:
// HOME (so the credentials land in a scratch directory), BROWSER=true (the harness drives Chromium itself
// instead of a desktop opener), and free ports for the IdP and the gateway (IDP_PORT, GATEWAY_PORT) and any
// free port for the tool servers, so this test never collides with another `make dev` on the machine. With the
// default ports the banner prints the same lines without --issuer/--gateway.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, OLD_NODE, oldNodeVersion } from '../cli/support.ts';
import { freePort } from '../helpers/processes.ts';
import { freshCheckout, seedInstalledTools } from './checkout.ts';
import { type Running, Terminal } from './terminal.ts';

const DEV_USER = 'dev@example.com';
const STARTUP_MS = 180_000;

let scratch: string;
let browser: Browser;
let shell: Terminal;
let dev: Running | undefined;
/** The banner's command lines, by what they do. */
let lines: { login: string; tools: string; call: string; cli: string };

beforeAll(async () => {
  oldNodeVersion(); // fails with one line when there is no old system Node to start from
  scratch = await mkdtemp(join(tmpdir(), 'platform-newcomer-'));
  const checkout = join(scratch, 'platform-identity');
  await freshCheckout(checkout);
  await seedInstalledTools(checkout, process.env);
  browser = await launchChromium();
  const [idp, gateway] = [await freePort(), await freePort()];
  shell = new Terminal(checkout, {
    // The system Node first: `node` is Node 20 until make's Node 24 takes over by itself.
    PATH: `${OLD_NODE.replace(/\/node$/, '')}:/usr/local/bin:/usr/bin:/bin`,
    HOME: join(scratch, 'home'),
    BROWSER: 'true',
    IDP_PORT: String(idp),
    GATEWAY_PORT: String(gateway),
    PLATFORM_MCP_PORT: '0',
    MAIL_MCP_PORT: '0',
    DEALS_MCP_PORT: '0',
    ...(process.env.NEWCOMER_INSTALL === '1' && process.env.npm_config_cache
      ? { npm_config_cache: process.env.npm_config_cache }
      : {}),
  });
}, STARTUP_MS);

afterAll(async () => {
  await dev?.interrupt();
  await browser?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

async function startDev(): Promise<Running> {
  const p = shell.start('make dev');
  await p.waitFor(/Stop with Ctrl-C\./, STARTUP_MS);
  return p;
}

/** The first `  <cli> <subcommand> …` line of the banner. */
function bannerLine(banner: string, subcommand: string): string {
  const m = new RegExp(`^ {2}(\\S+ ${subcommand}\\b.*)$`, 'm').exec(banner);
  if (!m) throw new Error(`the banner has no "${subcommand}" line:\n${banner}`);
  return m[1]!;
}

/** The login line as printed; the browser leg in Chromium with the development sign-in page. */
async function signIn(line: string): Promise<void> {
  const login = shell.start(line);
  const [, url] = await login.waitFor(/^ {2}(http:\/\/\S+\/oauth\/authorize\?\S+)$/m);
  const page = await browser.newPage();
  try {
    await page.goto(url!);
    // The sign-in page offers the development user, an administrator of the dev stack.
    expect(await page.inputValue('input[name=email]')).toBe(DEV_USER);
    await Promise.all([
      page.waitForURL(/^http:\/\/127\.0\.0\.1:\d+\/callback\?/),
      page.click('button[type=submit]'),
    ]);
    expect(await page.textContent('body')).toContain(`as ${DEV_USER}`);
  } finally {
    await page.close();
  }
  expect(await login.exited, login.output()).toBe(0);
  expect(login.stdout()).toMatch(new RegExp(`^Logged in to http://localhost:\\d+ as ${DEV_USER}\\.\\n$`));
}

describe('the five-minute walk-through on a fresh checkout', () => {
  let revokedToken: string;

  it('make dev on the system Node prints lines that run as printed', {
    timeout: STARTUP_MS,
  }, async () => {
    expect((await shell.run('node --version')).stdout).toBe(`v${oldNodeVersion()}\n`);
    dev = await startDev();
    const banner = dev.stderr();
    expect(banner).toContain('platform dev is running.');
    expect(banner).toContain(`Administrators   ${DEV_USER}`);
    const login = bannerLine(banner, 'login');
    const cli = login.split(' ')[0]!;
    expect(cli).toBe('./bin/platform.js');
    lines = { login, tools: bannerLine(banner, 'tools'), call: bannerLine(banner, 'call'), cli };
  });

  it('signs in with the banner’s login line, lists the tools and calls one', {
    timeout: 60_000,
  }, async () => {
    await signIn(lines.login);
    const tools = await shell.run(lines.tools);
    expect(tools.stderr).toBe('');
    expect(tools.code).toBe(0);
    expect(tools.stdout).toContain('whoami');
    const who = await shell.run(lines.call);
    expect(who.stderr).toBe('');
    expect(who.code).toBe(0);
    expect(JSON.parse(who.stdout)).toMatchObject({
      email: DEV_USER,
      issuer: 'platform',
      client_id: 'platform-cli',
    });
  });

  it('admin revoke-token: that token is refused at once', { timeout: 30_000 }, async () => {
    revokedToken = (await shell.run(`${lines.cli} token`)).stdout.trim();
    const { jti } = decodeJwt(revokedToken);
    const r = await shell.run(`${lines.cli} admin revoke-token --jti ${jti}`);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^revoked jti ${jti} until \\S+\\n$`));
    const refused = await shell.run(`${lines.call} --token ${revokedToken}`);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^platform: .*401.*token_revoked.*\n$/);
  });

  it('admin revoke-user: the user’s next call is refused at once, and so is every sign-in', {
    timeout: 30_000,
  }, async () => {
    const r = await shell.run(`${lines.cli} admin revoke-user --email ${DEV_USER}`);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(`^revoked ${DEV_USER}: tokens issued at or before \\S+ are refused; `),
    );
    const refused = await shell.run(lines.call);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^platform: .*\n$/);
    expect(refused.stderr).toContain('platform login');
  });

  it('make dev stopped with Ctrl-C and started again: both revocations still hold', {
    timeout: STARTUP_MS,
  }, async () => {
    const stopped = dev!;
    await stopped.interrupt();
    expect(stopped.stdout()).toMatch(/"msg":"stopped"/);
    dev = await startDev();
    // The revocations were read back from the embedded database before the stack served anything.
    const replayed = /"entries":(\d+),"msg":"revocations replayed to the denylist"/.exec(dev.stdout());
    expect(Number(replayed?.[1])).toBeGreaterThanOrEqual(3); // the jti, the subject and the email cut-offs
    const token = await shell.run(`${lines.call} --token ${revokedToken}`);
    expect(token.code).toBe(1);
    expect(token.stderr).toMatch(/token_revoked/);
    const user = await shell.run(lines.call);
    expect(user.code).toBe(1);
    expect(user.stderr).toContain('platform login');
  });

  it('signs in again, sees the revocations in the audit, and logs out', { timeout: 60_000 }, async () => {
    await signIn(lines.login);
    expect((await shell.run(lines.call)).code).toBe(0);
    const audit = await shell.run(`${lines.cli} admin audit --format jsonl`);
    expect(audit.code, audit.stderr).toBe(0);
    const events = audit.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string });
    expect(events.map((e) => e.event)).toEqual(expect.arrayContaining(['revoke-token', 'revoke-user']));
    const out = await shell.run(`${lines.cli} logout`);
    expect(out).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^Logged out of http:\/\/localhost:\d+\.\n$/),
    });
    const after = await shell.run(lines.call);
    expect(after).toMatchObject({ code: 1, stderr: 'platform: not logged in: run `platform login`\n' });
  });
});
