// Shared by the client-command tests: run `platform` to completion, and a headless Chromium for the browser leg.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { PLATFORM_BIN } from '../helpers/processes.ts';

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

/** A temporary XDG_CONFIG_HOME, removed by `cleanup`. */
export async function tempConfigHome(): Promise<{
  dir: string;
  credentials: string;
  cleanup(): Promise<void>;
}> {
  const dir = await mkdtemp(join(tmpdir(), 'platform-cli-'));
  return {
    dir,
    credentials: join(dir, 'platform', 'credentials.json'),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

/** The authorize URL `platform login` prints. */
export const AUTHORIZE_URL = /(http:\/\/\S+\/oauth\/authorize\?\S+)/;
