// deploy/Caddyfile run by a real Caddy in front of real `platform idp` / `platform gateway` / `platform tool`
// processes: the doctor passes through it (prefix kept, Host passed on, SSE through `encode gzip`), the IdP's
// routes reach the IdP, a request made while the backend is briefly down is held and retried within the
// 5 s window, and the IdP's rate limits count each client behind it (the open port and the tunnel's port)
// on its own. Needs the `caddy` binary (Debian's package); without it this file fails and says so.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { freePort, type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { type DeployStack, startDeployStack } from './stack.ts';
import { DEPLOY_DIR, row, runDoctor } from './support.ts';

const CADDY = process.env.CADDY_PATH ?? 'caddy';
const haveCaddy = spawnSync(CADDY, ['version']).status === 0;

interface Caddy {
  /** The open port (the one compose publishes). */
  url: string;
  /** The tunnel's port (cloudflared's only). */
  tunnelUrl: string;
  stop(): Promise<void>;
}

async function startCaddy(env: Record<string, string>, home: string, port?: number): Promise<Caddy> {
  port ??= await freePort();
  const tunnelPort = await freePort();
  const child: ChildProcess = spawn(
    CADDY,
    ['run', '--config', join(DEPLOY_DIR, 'Caddyfile'), '--adapter', 'caddyfile'],
    {
      env: {
        PATH: process.env.PATH,
        HOME: home,
        XDG_DATA_HOME: home,
        XDG_CONFIG_HOME: home,
        CADDY_ADMIN: 'off',
        // No host in the address: a host would become a matcher, and the foreign-Host probe must reach the gateway.
        PROXY_ADDRESS: `:${port}`,
        TUNNEL_ADDRESS: `:${tunnelPort}`,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d));
  child.stderr!.on('data', (d: Buffer) => (output += d));
  const url = `http://127.0.0.1:${port}`;
  const until = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`caddy exited: ${output}`);
    // A TCP connect, not an HTTP request: with the backend down, a request would wait out the retry window.
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > until) {
      child.kill('SIGKILL');
      throw new Error(`caddy did not listen: ${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    tunnelUrl: `http://127.0.0.1:${tunnelPort}`,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        // Caddy drains idle keep-alive connections on SIGTERM for up to its grace period; a test has none to keep.
        const kill = setTimeout(() => child.kill('SIGKILL'), 2000);
        child.once('exit', () => {
          clearTimeout(kill);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

function getJson(url: string, headers: Record<string, string>): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('deploy/Caddyfile in front of the stack', () => {
  let home: string;
  let stack: DeployStack;
  let caddy: Caddy;

  beforeAll(async () => {
    // `make test` installs Debian's caddy when it can; without it this fails with one line, never skips.
    if (!haveCaddy)
      throw new Error(`No ${CADDY} binary: install Debian's "caddy" package (or set CADDY_PATH)`);
    home = await mkdtemp(join(tmpdir(), 'platform-caddy-'));
    // The public base URL is the proxy's, as in a deployment; it is known before Caddy starts only by port.
    const proxyPort = await freePort();
    stack = await startDeployStack({
      services: ['platform'],
      live: ['platform'],
      publicBaseUrl: `http://127.0.0.1:${proxyPort}`,
    });
    caddy = await startCaddy(
      { GATEWAY_UPSTREAM: `127.0.0.1:${stack.gatewayPort}`, IDP_UPSTREAM: new URL(stack.idp.url).host },
      home,
      proxyPort,
    );
  }, 60_000);

  afterAll(async () => {
    await caddy?.stop();
    await stack?.stop();
    await rm(home, { recursive: true, force: true });
  });

  it('passes every doctor check through the proxy, tools/list over MCP included', async () => {
    const r = await runDoctor(['--base-url', caddy.url, '--service', 'platform'], {
      PLATFORM_TOKEN: stack.token,
    });
    expect(r.rows.filter((x) => x.verdict !== 'PASS')).toEqual([]);
    expect(r.code).toBe(0);
    // 421 from the gateway itself: the proxy passed the foreign Host on instead of answering for it.
    expect(row(r.rows, 'platform', 'foreign Host').detail).toBe('421 for Host: platform-doctor.invalid');
  });

  it("routes the IdP's discovery and key set to the IdP", async () => {
    const discovery = await fetch(`${caddy.url}/.well-known/openid-configuration`);
    expect(discovery.status).toBe(200);
    expect(((await discovery.json()) as { issuer: string }).issuer).toBe(stack.idp.issuer);
    const jwks = await fetch(`${caddy.url}/.well-known/jwks.json`);
    expect(((await jwks.json()) as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
  });

  it('gzips JSON when asked', async () => {
    const res = await fetch(`${caddy.url}/.well-known/openid-configuration`, {
      headers: { 'accept-encoding': 'gzip' },
    });
    expect(res.headers.get('content-encoding')).toBe('gzip');
  });
});

describe('deploy/Caddyfile retry window', () => {
  it('holds a request while the backend is down and forwards it, prefix and Host intact, once it is up', async () => {
    const home = await mkdtemp(join(tmpdir(), 'platform-caddy-'));
    const backendPort = await freePort();
    const caddy = await startCaddy(
      { GATEWAY_UPSTREAM: `127.0.0.1:${backendPort}`, IDP_UPSTREAM: `127.0.0.1:${backendPort}` },
      home,
    );
    let backend: Server | undefined;
    try {
      const started = Date.now();
      // node:http, not fetch: fetch would replace the Host header with the URL's.
      const pending = getJson(`${caddy.url}/platform/mcp?x=1`, { host: 'app.example.com' });
      // The backend comes up 1.5 s later: inside the 5 s retry window, several 250 ms intervals in.
      await new Promise((r) => setTimeout(r, 1500));
      backend = createServer((req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ url: req.url, host: req.headers.host }));
      });
      await new Promise<void>((resolve) => backend!.listen(backendPort, '127.0.0.1', resolve));
      const res = await pending;
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ url: '/platform/mcp?x=1', host: 'app.example.com' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    } finally {
      await caddy.stop();
      await new Promise((r) => (backend ? backend.close(r) : r(undefined)));
      await rm(home, { recursive: true, force: true });
    }
  });
});

/**
 * A registration through the proxy from `source` (a loopback address of its own: the kernel accepts any
 * 127.0.0.0/8 source), with whatever forwarding headers the client chooses to send.
 */
function registerThrough(url: string, source: string, headers: Record<string, string> = {}): Promise<number> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: '/oauth/register',
        method: 'POST',
        localAddress: source,
        agent: false,
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ redirect_uris: ['http://127.0.0.1:5555/callback'] }));
  });
}

const forged = () => `198.51.100.${Math.floor(Math.random() * 254) + 1}`;

describe('deploy/Caddyfile: the IdP counts each client behind the proxy on its own', () => {
  const LIMIT = 3;
  let home: string;
  let db: TestDatabase;
  let idp: IdpProcess;
  let caddy: Caddy;

  beforeAll(async () => {
    if (!haveCaddy)
      throw new Error(`No ${CADDY} binary: install Debian's "caddy" package (or set CADDY_PATH)`);
    home = await mkdtemp(join(tmpdir(), 'platform-caddy-'));
    db = await createTestDatabase();
    // As compose configures it: X-Forwarded-For believed from the proxy only (here Caddy reaches the IdP from
    // 127.0.0.1; the clients below come from other loopback addresses).
    idp = await startIdpProcess({
      databaseUrl: db.url,
      redisUrl: inject('redisUrl'),
      env: { PLATFORM_RATE_LIMITS: `register=${LIMIT}/60`, PLATFORM_TRUSTED_PROXIES: '127.0.0.1' },
    });
    caddy = await startCaddy(
      { IDP_UPSTREAM: new URL(idp.url).host, GATEWAY_UPSTREAM: `127.0.0.1:${await freePort()}` },
      home,
    );
  }, 60_000);

  afterAll(async () => {
    await caddy?.stop();
    await idp?.stop();
    await db?.drop();
    await rm(home, { recursive: true, force: true });
  });

  it('open port: a client exhausting `register` does not limit another client', async () => {
    for (let i = 0; i < LIMIT; i++) expect(await registerThrough(caddy.url, '127.0.0.2')).toBe(201);
    expect(await registerThrough(caddy.url, '127.0.0.2')).toBe(429);
    expect(await registerThrough(caddy.url, '127.0.0.3')).toBe(201);
  });

  it('open port: forged X-Forwarded-For and Cf-Connecting-IP do not buy a fresh bucket', async () => {
    const client = '127.0.0.4';
    for (let i = 0; i <= LIMIT; i++) {
      const status = await registerThrough(caddy.url, client, {
        'x-forwarded-for': forged(),
        'cf-connecting-ip': forged(),
      });
      expect(status, `request ${i + 1}`).toBe(i < LIMIT ? 201 : 429);
    }
  });

  it('tunnel port: each Cf-Connecting-IP is a client of its own, and X-Forwarded-For beside it is ignored', async () => {
    // cloudflared's requests all come from one container; Cf-Connecting-IP names the client at the edge.
    const tunnel = '127.0.0.5';
    const a = { 'cf-connecting-ip': '203.0.113.10' };
    for (let i = 0; i < LIMIT; i++) expect(await registerThrough(caddy.tunnelUrl, tunnel, a)).toBe(201);
    expect(await registerThrough(caddy.tunnelUrl, tunnel, a)).toBe(429);
    expect(await registerThrough(caddy.tunnelUrl, tunnel, { ...a, 'x-forwarded-for': forged() })).toBe(429);
    expect(await registerThrough(caddy.tunnelUrl, tunnel, { 'cf-connecting-ip': '203.0.113.11' })).toBe(201);
  });
});
