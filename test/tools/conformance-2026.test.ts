// The official MCP conformance suite's 2026-07-28 line (@modelcontextprotocol/conformance 0.2.0-alpha.12,
// installed as conformance-next beside the 0.1.16 that conformance.test.ts runs) against a real stack:
// - `server --requirements 2026-07-28` against each tool server through the gateway, with a platform token the
//   bearer proxy adds (conformance/bearer-proxy.ts: the suite takes no token of its own);
// - `authorization` against the IdP: a client registered through /oauth/register, the suite's authorization
//   URL opened in headless Chromium signed in to the web application, the consent page approved, the suite's
//   own loopback callback receiving the code and exchanging it.
// conformance/baseline-2026.yaml names what may fail and why; conformance/judge.ts holds every scenario that
// ran to it (a failure it does not name fails the test, and so does an entry that passes or did not run).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { launchChromium } from '../cli/support.ts';
import { registerClient } from '../helpers/clients.ts';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { sessionCookieName, signIn } from '../helpers/oauth.ts';
import { freePort } from '../helpers/processes.ts';
import { type BearerProxy, startBearerProxy } from './conformance/bearer-proxy.ts';
import { judge, readResults } from './conformance/judge.ts';
import { SERVICES, type Stack, startStack } from './stack.ts';

const SUITE = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/conformance-next/dist/index.js', import.meta.url),
);
const BASELINE = fileURLToPath(new URL('./conformance/baseline-2026.yaml', import.meta.url));
const REVISION = '2026-07-28';

let stack: Stack;
let user: SeededUser;
let proxy: BearerProxy;
let browser: Browser;
let out: string;
let baseline: { server: string[]; authorization: string[] };

beforeAll(async () => {
  const port = await freePort();
  const front = `http://127.0.0.1:${port}`;
  [stack, browser, out, baseline] = await Promise.all([
    // The proxy's origin is the origin the suite's requests carry: the gateway accepts it as a deployment
    // accepts its public origin.
    startStack({
      gatewayEnv: Object.fromEntries(SERVICES.map((s) => [`${s.toUpperCase()}_MCP_ALLOWED_ORIGINS`, front])),
    }),
    launchChromium(),
    mkdtemp(join(tmpdir(), 'mcp-conformance-2026-')),
    readFile(BASELINE, 'utf8').then((t) => parse(t)),
  ]);
  user = await seedUser(stack.db.pool);
  const { access_token } = await signIn(stack.idp.issuer, user.sessionToken, {
    scope: `openid email ${SERVICES.map((s) => `mcp:${s}`).join(' ')}`,
  });
  proxy = await startBearerProxy({ target: stack.baseUrl, token: access_token, port });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await stack?.stop();
  if (out) await rm(out, { recursive: true, force: true });
});

interface SuiteRun {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function startSuite(args: string[]): SuiteRun {
  const child = spawn(process.execPath, [SUITE, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => {
    output += d;
  });
  child.stderr!.on('data', (d) => {
    output += d;
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  return { child, output: () => output, exited };
}

/** No failure outside the baseline, no baseline entry that passes or did not run. */
const CLEAN = { unexpected: [], stale: [] };

/** The suite's own summary (and baseline report), the part of its output worth showing on a failure. */
function summary(run: SuiteRun): string {
  const o = run.output();
  const at = o.indexOf('=== SUMMARY ===');
  return at < 0 ? o.slice(-4000) : o.slice(at);
}

/** Resolves with the first match of `re` in the suite's output; rejects if the suite exits first. */
function waitForOutput(run: SuiteRun, re: RegExp): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const m = re.exec(run.output());
      if (!m) return;
      run.child.stdout!.off('data', check);
      resolve(m);
    };
    run.child.stdout!.on('data', check);
    run.child.once('exit', () => reject(new Error(`the suite exited before ${re}:\n${run.output()}`)));
    check();
  });
}

describe(`MCP conformance ${REVISION} (server, through the gateway)`, () => {
  it.each(SERVICES)(
    '%s: every scenario the revision requires passes but for the baseline',
    async (service) => {
      const dir = join(out, service);
      const run = startSuite([
        'server',
        '--url',
        `${proxy.url}/${service}/mcp`,
        '--requirements',
        REVISION,
        '--expected-failures',
        BASELINE,
        '--output-dir',
        dir,
      ]);
      const code = await run.exited;
      const results = await readResults(dir, 'server');
      const verdict = judge(results, baseline.server);
      expect({ unexpected: verdict.unexpected, stale: verdict.stale }, summary(run)).toEqual(CLEAN);
      // The suite's own verdict on the scored scenarios agrees.
      expect(code, summary(run)).toBe(0);
      // The scenarios our servers are held to ran and passed whole.
      for (const s of ['server-stateless', 'tools-list', 'dns-rebinding-protection', 'caching'])
        expect(verdict.ran).toContain(s);
      for (const s of ['tools-list', 'dns-rebinding-protection', 'http-header-validation'])
        expect(
          results.get(s)?.every((c) => c.status === 'SUCCESS' || c.status === 'INFO'),
          s,
        ).toBe(true);
    },
    60_000,
  );
});

describe(`MCP conformance ${REVISION} (authorization, against the IdP)`, () => {
  it('metadata and the authorization code grant, the consent page approved in Chromium', async () => {
    const port = await freePort();
    const reg = await registerClient(stack.idp.issuer, {
      client_name: 'MCP conformance suite',
      redirect_uris: [`http://127.0.0.1:${port}/callback`],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    });
    expect(reg.status).toBe(201);
    const dir = join(out, 'authorization');
    const run = startSuite([
      'authorization',
      '--url',
      stack.idp.issuer,
      '--client-id',
      reg.json.client_id,
      '--port',
      String(port),
      '--resource',
      `${stack.baseUrl}/platform/mcp`,
      '--spec-version',
      REVISION,
      '--output-dir',
      dir,
    ]);
    // The suite prints the authorization URL, then listens on its loopback callback.
    const [, url] = await waitForOutput(run, /^(http:\S+\/oauth\/authorize\?\S+)$/m);
    await waitForOutput(run, /Callback server started/);
    const context = await browser.newContext();
    try {
      await context.addCookies([
        { name: sessionCookieName(stack.idp.issuer), value: user.sessionToken, url: stack.idp.issuer },
      ]);
      const page = await context.newPage();
      await page.goto(url!);
      expect(await page.textContent('main')).toContain('MCP conformance suite');
      await page.click('button[value=approve]');
      const code = await run.exited;
      const verdict = judge(await readResults(dir, 'authorization-server'), baseline.authorization);
      expect({ unexpected: verdict.unexpected, stale: verdict.stale }, summary(run)).toEqual(CLEAN);
      expect(verdict.ran.sort()).toEqual([
        'authorization-code-grant',
        'authorization-server-metadata-endpoint',
      ]);
      expect(code, summary(run)).toBe(0);
    } finally {
      await context.close();
      run.child.kill();
    }
  }, 60_000);
});
