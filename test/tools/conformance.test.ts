// The official MCP conformance suite (@modelcontextprotocol/conformance) against the mail tool server, through
// a proxy that adds the gateway's signed identity headers (conformance/signing-proxy.ts). Every server scenario
// of the suite runs; conformance/baseline.yml names the ones that cannot apply to a server with these tools, and
// why. The suite itself fails the run on an unexpected failure and on a baseline entry that passes.
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { freePort } from '../helpers/processes.ts';
import { type SigningProxy, startSigningProxy } from './conformance/signing-proxy.ts';
import { type InProcessServer, startInProcess, toolKey } from './helpers.ts';

const SUITE = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/conformance/dist/index.js', import.meta.url),
);
const BASELINE = fileURLToPath(new URL('./conformance/baseline.yml', import.meta.url));
/** The scenarios the brief holds the server to; they must run and pass, never sit in the baseline. */
const REQUIRED = ['server-initialize', 'tools-list', 'ping', 'tools-call-error', 'dns-rebinding-protection'];

let db: TestDatabase;
let user: SeededUser;
let server: InProcessServer;
let proxy: SigningProxy;
let out: string;

beforeAll(async () => {
  db = await createTestDatabase();
  user = await seedUser(db.pool);
  const proxyPort = await freePort();
  server = await startInProcess('mail', {
    DATABASE_URL: db.url,
    // What a tool server bound to this machine should accept: loopback names only, from the proxy's origin.
    MAIL_MCP_ALLOWED_HOSTS: 'localhost:*,127.0.0.1:*,[::1]:*',
    MAIL_MCP_ALLOWED_ORIGINS: `http://127.0.0.1:${proxyPort},http://localhost:${proxyPort}`,
  });
  proxy = await startSigningProxy({
    target: server.url,
    port: proxyPort,
    service: 'mail',
    key: toolKey('mail'),
    identity: {
      email: user.email,
      sub: user.sub,
      issuer: 'platform',
      scope: 'openid email mcp:mail',
      clientId: 'conformance',
    },
  });
  out = await mkdtemp(join(tmpdir(), 'mcp-conformance-'));
});

afterAll(async () => {
  await proxy?.close();
  await server?.close();
  await db?.drop();
  if (out) await rm(out, { recursive: true, force: true });
});

function runSuite(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SUITE, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => {
      output += d;
    });
    child.stderr.on('data', (d) => {
      output += d;
    });
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, output }));
  });
}

interface Check {
  id: string;
  status: string;
  errorMessage?: string;
}

describe('MCP conformance suite (server scenarios)', () => {
  it('passes every applicable scenario; the baseline names the rest', async () => {
    const run = await runSuite([
      'server',
      '--url',
      `${proxy.url}/mail/mcp`,
      '--suite',
      'active',
      '--expected-failures',
      BASELINE,
      '--output-dir',
      out,
    ]);
    expect(run.output, run.output).not.toMatch(/unexpected|stale/i);
    expect(run.code, run.output).toBe(0);

    // The required scenarios ran, and every one of their checks passed.
    const dirs = await readdir(out);
    for (const scenario of REQUIRED) {
      const dir = dirs.find((d) => d.startsWith(`server-${scenario}-`) || d === scenario);
      expect(dir, `no results for ${scenario} in ${dirs.join(', ')}`).toBeDefined();
      const checks = JSON.parse(await readFile(join(out, dir!, 'checks.json'), 'utf8')) as Check[];
      expect(checks.length).toBeGreaterThan(0);
      for (const c of checks)
        expect(c, `${scenario}: ${c.errorMessage}`).toMatchObject({ status: 'SUCCESS' });
    }
  }, 240_000);
});
