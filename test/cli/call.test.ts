// `platform call` and `platform tools` as processes against an endpoint that behaves like the gateway at the
// edge: it demands the bearer and answers 401/404 with the contract's error body. Behind it, one service served
// by the SDK v2 handler (both eras) and one by the v1 SDK alone (an older server the CLI falls back to the
// handshake for), plus a stand-in issuer for the refresh after a revoked access token. The full path through
// the real gateway is in dev.test.ts and test/tools/replicas.test.ts.
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { McpServer as LegacyServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport as LegacyTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readCredentials, writeCredentials } from '../../cli/client/credentials.ts';
import { freePort } from '../helpers/processes.ts';
import { runPlatform } from './support.ts';

const TOKEN = 'test-access-token';
const REVOKED = 'revoked-access-token';
let server: Server;
let gateway: string;
/** The protocol version of every MCP request the modern service answered. */
const seen: string[] = [];
let refreshes = 0;

function fail401(res: ServerResponse, reason: string): void {
  res.writeHead(401, {
    'content-type': 'application/json',
    'www-authenticate': 'Bearer error="invalid_token"',
  });
  res.end(
    JSON.stringify({
      error: { code: 'INVALID_TOKEN', message: 'token rejected', context: { request_id: 'r1', reason } },
    }),
  );
}

const modern = toNodeHandler(
  createMcpHandler(({ era }) => {
    const mcp = new McpServer({ name: 'fake', version: '1.0.0' });
    mcp.registerTool(
      'whoami',
      {
        description: 'Who is calling',
        inputSchema: z.object({}),
        outputSchema: z.object({ email: z.string() }),
      },
      async () => {
        seen.push(era);
        return {
          content: [{ type: 'text', text: '{"email":"x@example.com"}' }],
          structuredContent: { email: 'x@example.com' },
        };
      },
    );
    mcp.registerTool(
      'echo',
      {
        description: 'Says it back',
        inputSchema: z.object({
          say: z.string().describe('what to say'),
          times: z.number().int().optional(),
        }),
      },
      async ({ say }) => ({ content: [{ type: 'text', text: `you said ${say}` }] }),
    );
    mcp.registerTool('fail', { description: 'fails', inputSchema: z.object({}) }, async () => ({
      isError: true,
      content: [{ type: 'text', text: 'send_as_forbidden: only admins may send as another user' }],
    }));
    return mcp;
  }),
);

async function legacy(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const mcp = new LegacyServer({ name: 'old', version: '1.0.0' });
  mcp.registerTool('whoami', { description: 'who', inputSchema: {} }, async () => ({
    content: [{ type: 'text', text: 'old server' }],
  }));
  const transport = new LegacyTransport({ sessionIdGenerator: undefined });
  res.on('close', () => {
    void transport.close();
    void mcp.close();
  });
  await mcp.connect(transport);
  await transport.handleRequest(req, res);
}

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const url = req.url ?? '/';
    if (url === '/.well-known/openid-configuration') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          issuer: gateway,
          token_endpoint: `${gateway}/oauth/token`,
          authorization_endpoint: `${gateway}/oauth/authorize`,
        }),
      );
      return;
    }
    if (url === '/oauth/token') {
      refreshes++;
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(
        JSON.stringify({
          access_token: TOKEN,
          token_type: 'Bearer',
          expires_in: 3600,
          refresh_token: 'refresh-2',
          scope: 'mcp:platform mcp:deals',
        }),
      );
      return;
    }
    const auth = req.headers.authorization;
    if (auth === `Bearer ${REVOKED}`) return fail401(res, 'token_revoked');
    if (auth !== `Bearer ${TOKEN}` && !auth?.startsWith('Bearer ey')) return fail401(res, 'token_expired');
    if (url.startsWith('/platform/mcp')) return void modern(req, res);
    if (url.startsWith('/legacy/mcp')) return legacy(req, res);
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        error: {
          code: 'NOT_FOUND',
          message: 'no such route',
          context: { request_id: 'r2', reason: 'no such route' },
        },
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  gateway = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  seen.length = 0;
});

const call = (args: string[], env: Record<string, string> = {}) =>
  runPlatform(['call', ...args], {
    PLATFORM_TOKEN: TOKEN,
    PLATFORM_GATEWAY_URL: gateway,
    XDG_CONFIG_HOME: '/nonexistent',
    ...env,
  });

/** A JWT-shaped token (unsigned: the stand-in gateway only looks at its shape) carrying `scope`. */
function jwtWithScope(scope: string): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'none' })}.${part({ scope })}.sig`;
}

describe('platform call', () => {
  it('speaks 2026-07-28 to a v2 server, prints structured content as JSON and text content as text', async () => {
    const who = await call(['platform', 'whoami']);
    expect(who.code).toBe(0);
    expect(JSON.parse(who.stdout)).toEqual({ email: 'x@example.com' });
    expect(seen).toEqual(['modern']);
    const echo = await call(['platform', 'echo', '{"say":"hello"}']);
    expect(echo).toMatchObject({ code: 0, stdout: 'you said hello\n' });
  });

  it('falls back to the initialize handshake for a server without 2026-07-28', async () => {
    const r = await call(['legacy', 'whoami']);
    expect(r).toMatchObject({ code: 0, stdout: 'old server\n', stderr: '' });
  });

  it('a tool error goes to stderr with a non-zero exit', async () => {
    const r = await call(['platform', 'fail']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      'platform: platform/fail failed: send_as_forbidden: only admins may send as another user\n',
    );
  });

  it('an unknown tool is answered with the tools the service has', async () => {
    const r = await call(['platform', 'whoareyou']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'platform: platform has no tool "whoareyou"; its tools: whoami, echo, fail (see `platform tools platform`)\n',
    );
  });

  it('an unknown service is answered with the services the sign-in covers', async () => {
    const r = await call(['nosuch', 'whoami'], {
      PLATFORM_TOKEN: jwtWithScope('openid mcp:platform mcp:deals'),
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'platform: the gateway has no service "nosuch"; your sign-in covers: platform, deals\n',
    );
  });

  it('bad JSON arguments are one clear line before any request', async () => {
    const r = await call(['platform', 'echo', '{say: hello}']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^platform: json-args is not valid JSON \(.*\); e\.g\. '\{"deal_id": "D-1"\}'\n$/,
    );
    const arr = await call(['platform', 'echo', '[1]']);
    expect(arr.stderr).toBe(`platform: json-args must be a JSON object, e.g. '{"deal_id": "D-1"}'\n`);
  });

  it("a refused token shows the gateway's error code and reason, and how to fix it", async () => {
    const r = await call(['platform', 'whoami'], { PLATFORM_TOKEN: 'wrong' });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `platform: ${gateway}/platform/mcp answered 401: INVALID_TOKEN: token rejected (token_expired); run \`platform login\`\n`,
    );
  });

  it('a revoked access token from the login is refreshed once and the call made again', async () => {
    const home = await mkdtemp(join(tmpdir(), 'platform-call-'));
    try {
      const path = join(home, 'platform', 'credentials.json');
      await writeCredentials(path, {
        issuer: gateway,
        client_id: 'platform-cli',
        access_token: REVOKED,
        refresh_token: 'refresh-1',
        expires_at: Math.floor(Date.now() / 1000) + 3000,
        scope: 'mcp:platform',
      });
      const before = refreshes;
      const r = await call(['platform', 'whoami'], { PLATFORM_TOKEN: '', XDG_CONFIG_HOME: home });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual({ email: 'x@example.com' });
      expect(refreshes).toBe(before + 1);
      expect(await readCredentials(path)).toMatchObject({ access_token: TOKEN, refresh_token: 'refresh-2' });
      // A token given with --token / PLATFORM_TOKEN is never refreshed: the refusal is shown as it is.
      const given = await call(['platform', 'whoami'], { PLATFORM_TOKEN: REVOKED, XDG_CONFIG_HOME: home });
      expect(given.code).toBe(1);
      expect(given.stderr).toMatch(/answered 401: INVALID_TOKEN: token rejected \(token_revoked\)/);
      expect(refreshes).toBe(before + 1);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });

  it('an unreachable gateway is named; no credentials means log in first', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const r = await call(['platform', 'whoami', '--gateway', dead]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `platform: cannot reach the gateway at ${dead}/platform/mcp: connection refused (is it running?)\n`,
    );
    const anon = await runPlatform(['call', 'platform', 'whoami'], {
      XDG_CONFIG_HOME: '/nonexistent',
      PLATFORM_GATEWAY_URL: gateway,
    });
    expect(anon.stderr).toBe('platform: not logged in: run `platform login`\n');
  });
});

describe('platform tools', () => {
  it('lists names, descriptions and arguments', async () => {
    const r = await runPlatform(['tools', 'platform'], {
      PLATFORM_TOKEN: TOKEN,
      PLATFORM_GATEWAY_URL: gateway,
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      [
        'whoami — Who is calling',
        '  (no arguments)',
        '',
        'echo — Says it back',
        '  say    string  required  what to say',
        '  times  integer  optional',
        '',
        'fail — fails',
        '  (no arguments)',
        '',
      ].join('\n'),
    );
    const json = await runPlatform(['tools', 'platform', '--json'], {
      PLATFORM_TOKEN: TOKEN,
      PLATFORM_GATEWAY_URL: gateway,
    });
    expect((JSON.parse(json.stdout) as Array<{ name: string }>).map((t) => t.name)).toEqual([
      'whoami',
      'echo',
      'fail',
    ]);
  });

  it('a bad service name is a usage error (exit 2)', async () => {
    const r = await runPlatform(['tools', 'Not A Service'], {
      PLATFORM_TOKEN: TOKEN,
      PLATFORM_GATEWAY_URL: gateway,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('platform: "Not A Service" is not a service name (e.g. platform, mail, deals)\n');
  });
});
