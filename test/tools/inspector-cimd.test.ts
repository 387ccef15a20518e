// The MCP Inspector's CLI (npm @modelcontextprotocol/inspector, `--cli`) as a metadata-document client: its
// `--client-metadata-url` names a document served over https on localhost (named exactly in
// PLATFORM_CIMD_ALLOWED_HOSTS, CA through PLATFORM_CIMD_CA_FILE). The Inspector prints the authorization URL and
// listens on its loopback callback; Chromium, signed in to the web application, approves on the consent page;
// the Inspector exchanges the code and calls `whoami` through the gateway.
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { launchChromium } from '../cli/support.ts';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { freePort } from '../helpers/processes.ts';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from '../helpers/tls.ts';
import { type Stack, startStack } from './stack.ts';

const INSPECTOR = join(
  dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/inspector/package.json')),
  'clients/launcher/build/index.js',
);

let ca: TestCa;
let docs: TestHttpsServer;
let stack: Stack;
let user: SeededUser;
let browser: Browser;
let home: string;
let callback: string;
let clientId: string;

beforeAll(async () => {
  [ca, browser, home] = await Promise.all([
    createTestCa(),
    launchChromium(),
    mkdtemp(join(tmpdir(), 'platform-inspector-')),
  ]);
  callback = `http://127.0.0.1:${await freePort()}/oauth/callback`;
  docs = await startHttpsServer(ca, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        client_id: clientId,
        client_name: 'MCP Inspector',
        redirect_uris: [callback],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      }),
    );
  });
  clientId = `https://localhost:${docs.port}/inspector/client.json`;
  stack = await startStack({
    idpEnv: { PLATFORM_CIMD_ALLOWED_HOSTS: `localhost:${docs.port}`, PLATFORM_CIMD_CA_FILE: ca.caFile },
  });
  user = await seedUser(stack.db.pool);
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await docs?.close();
  await ca?.cleanup();
  if (home) await rm(home, { recursive: true, force: true });
});

it('inspector --cli --client-metadata-url signs in through the consent page and calls whoami', async () => {
  const { spawn } = await import('node:child_process');
  const child = spawn(
    process.execPath,
    [
      INSPECTOR,
      '--cli',
      '--server-url',
      `${stack.baseUrl}/platform/mcp`,
      '--transport',
      'http',
      '--client-metadata-url',
      clientId,
      '--callback-url',
      callback,
      '--method',
      'tools/call',
      '--tool-name',
      'whoami',
      '--format',
      'json',
    ],
    {
      env: { PATH: process.env.PATH, HOME: home, MCP_AUTO_OPEN_ENABLED: 'true', NO_COLOR: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const output = () => `${out}\n${err}`;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no authorization URL; output:\n${output()}`)), 30_000);
    const check = () => {
      const m = /(http:\/\/127\.0\.0\.1:\d+\/oauth\/authorize\?\S+)/.exec(output());
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout.on('data', check);
    child.stderr.on('data', check);
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`inspector exited before printing an authorization URL:\n${output()}`));
    });
  });
  expect(new URL(url).searchParams.get('client_id')).toBe(clientId);

  const context = await browser.newContext();
  await context.addCookies([
    { name: 'authjs.session-token', value: user.sessionToken, url: stack.idp.issuer },
  ]);
  const page = await context.newPage();
  await page.goto(url);
  expect((await page.textContent('main')) ?? '').toContain(
    `Its description is published at localhost:${docs.port}`,
  );
  await page.click('button[value=approve]');
  const code = await Promise.race([
    exited,
    new Promise<null>((_, reject) =>
      setTimeout(() => reject(new Error(`inspector did not finish:\n${output()}`)), 30_000),
    ),
  ]);
  await context.close();
  expect(code, output()).toBe(0);
  const result = JSON.parse(
    out
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .pop() ?? '{}',
  );
  expect(JSON.stringify(result)).toContain(user.email);
  expect(JSON.stringify(result)).toContain(clientId);
}, 120_000);
