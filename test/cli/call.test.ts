// `platform call` as a process against an MCP endpoint that behaves like the gateway at the edge: it demands
// the bearer and answers 401 with the contract's error body. The full path through the real gateway is in
// dev.test.ts; this file covers how results and failures are printed.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { freePort } from '../helpers/processes.ts';
import { runPlatform } from './support.ts';

const TOKEN = 'test-access-token';
let server: Server;
let gateway: string;

function mcpServer(): McpServer {
  const mcp = new McpServer({ name: 'fake', version: '1.0.0' });
  mcp.registerTool(
    'whoami',
    { description: 'who', inputSchema: {}, outputSchema: { email: z.string() } },
    async () => ({
      content: [{ type: 'text', text: '{"email":"x@example.com"}' }],
      structuredContent: { email: 'x@example.com' },
    }),
  );
  mcp.registerTool('echo', { description: 'echo', inputSchema: { say: z.string() } }, async ({ say }) => ({
    content: [{ type: 'text', text: `you said ${say}` }],
  }));
  mcp.registerTool('fail', { description: 'fails', inputSchema: {} }, async () => ({
    isError: true,
    content: [{ type: 'text', text: 'send_as_forbidden: only admins may send as another user' }],
  }));
  return mcp;
}

beforeAll(async () => {
  server = createServer(async (req, res) => {
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401, {
        'content-type': 'application/json',
        'www-authenticate': 'Bearer error="invalid_token"',
      });
      res.end(
        JSON.stringify({
          error: {
            code: 'INVALID_TOKEN',
            message: 'token rejected',
            context: { request_id: 'r1', reason: 'token_expired' },
          },
        }),
      );
      return;
    }
    if (!req.url?.startsWith('/platform/mcp')) {
      res.writeHead(404).end();
      return;
    }
    // Stateless: a fresh server and transport per request.
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    const mcp = mcpServer();
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  gateway = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const call = (args: string[], env: Record<string, string> = {}) =>
  runPlatform(['call', ...args], {
    PLATFORM_TOKEN: TOKEN,
    PLATFORM_GATEWAY_URL: gateway,
    XDG_CONFIG_HOME: '/nonexistent',
    ...env,
  });

describe('platform call', () => {
  it('prints structured content as JSON and text content as text', async () => {
    const who = await call(['platform', 'whoami']);
    expect(who.code).toBe(0);
    expect(JSON.parse(who.stdout)).toEqual({ email: 'x@example.com' });
    const echo = await call(['platform', 'echo', '{"say":"hello"}']);
    expect(echo).toMatchObject({ code: 0, stdout: 'you said hello\n' });
  });

  it('a tool error goes to stderr with a non-zero exit', async () => {
    const r = await call(['platform', 'fail']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      'platform: platform/fail failed: send_as_forbidden: only admins may send as another user\n',
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
