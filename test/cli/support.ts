// Shared by the client-command tests: run `platform` to completion, and a headless Chromium for the browser leg.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium } from 'playwright-core';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { type IdpProcess, PLATFORM_BIN, startIdpProcess } from '../helpers/processes.ts';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/**
 * The browser tests need Debian's Chromium (`make test` installs it when it can). Without it they fail with
 * this one line rather than being skipped: a skipped browser test proves nothing.
 */
export function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`No Chromium at ${CHROMIUM}: install Debian's "chromium" package or set CHROMIUM_PATH`);
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/**
 * A Node older than the CLI needs (22.12), as a newcomer's system Node: Debian's /usr/bin/node (Node 20), or
 * OLD_NODE_PATH. The tests that need it fail with this one line when it is missing or not old.
 */
export const OLD_NODE = process.env.OLD_NODE_PATH ?? '/usr/bin/node';
export function oldNodeVersion(): string {
  let v: string;
  try {
    v = execFileSync(OLD_NODE, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(
      `No Node at ${OLD_NODE}: install Debian's "nodejs" package (Node 20) or set OLD_NODE_PATH`,
    );
  }
  const [major, minor] = v.split('.').map(Number) as [number, number];
  if (major > 22 || (major === 22 && minor >= 12)) {
    throw new Error(`${OLD_NODE} is Node ${v}; these tests need one older than 22.12: set OLD_NODE_PATH`);
  }
  return v;
}

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `platform <args>` to completion with exactly `env` (plus PATH), stdout and stderr kept apart. */
export function runPlatform(
  args: string[],
  env: Record<string, string | undefined>,
  timeoutMs = 20_000,
): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [PLATFORM_BIN, ...args], {
      env: { PATH: process.env.PATH, ...env } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`platform ${args.join(' ')} did not finish in ${timeoutMs} ms; stderr:\n${stderr}`));
    }, timeoutMs);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface ConfigHome {
  dir: string;
  credentials: string;
  cleanup(): Promise<void>;
}

/** A temporary XDG_CONFIG_HOME, removed by `cleanup`. */
export async function tempConfigHome(): Promise<ConfigHome> {
  const dir = await mkdtemp(join(tmpdir(), 'platform-cli-'));
  return {
    dir,
    credentials: join(dir, 'platform', 'credentials.json'),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

/** The authorize URL `platform login` prints. */
export const AUTHORIZE_URL = /(http:\/\/\S+\/oauth\/authorize\?\S+)/;

/** What the login tests run against: a running IdP with one user, headless Chromium and a config home. */
export interface LoginStack {
  db: TestDatabase;
  idp: IdpProcess;
  user: SeededUser;
  browser: Browser;
  home: ConfigHome;
  /** A new browser context carrying the user's web-application session cookie (the caller closes it). */
  signedInContext(): Promise<BrowserContext>;
  stop(): Promise<void>;
}

export async function startLoginStack(redisUrl: string, email: string): Promise<LoginStack> {
  const [db, browser, home] = await Promise.all([createTestDatabase(), launchChromium(), tempConfigHome()]);
  const idp = await startIdpProcess({ databaseUrl: db.url, redisUrl });
  const user = await seedUser(db.pool, { email });
  return {
    db,
    idp,
    user,
    browser,
    home,
    async signedInContext() {
      const context = await browser.newContext();
      await context.addCookies([{ name: 'authjs.session-token', value: user.sessionToken, url: idp.issuer }]);
      return context;
    },
    async stop() {
      await browser.close();
      await idp.stop();
      await db.drop();
      await home.cleanup();
    },
  };
}
