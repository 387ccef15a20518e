// Several upstreams per service (replicas of one stateless tool server): requests spread over them, a replica
// that refuses connections is passed over, the retry window (5 s at 250 ms) holds a request while every replica
// is down, a request a replica may have started is never sent again, and MCP 2026-07-28's Mcp-Method /
// Mcp-Name headers are held to the body.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadGatewayConfig } from '../../gateway/config.ts';
import { decodeHeaderValue } from '../../gateway/proxy/mcp-headers.ts';
import { freePort } from '../helpers/processes.ts';
import {
  call,
  errorOf,
  forgetSharedKeySets,
  type GatewayProcess,
  gatewayEnv,
  type KeyServer,
  platformToken,
  startGatewayProcess,
  startKeyServer,
  startUpstream,
  type Upstream,
} from './helpers.ts';

let ks: KeyServer;
let a: Upstream;
let b: Upstream;
let downPort: number;
let laterPort: number;
let resetting: Server;
let resetSeen = 0;
let resettingPort: number;
let gw: GatewayProcess;
let token: string;

beforeAll(async () => {
  [ks, a, b, downPort, laterPort] = await Promise.all([
    startKeyServer(),
    startUpstream(),
    startUpstream(),
    freePort(),
    freePort(),
  ]);
  // A replica that reads the request and then drops the connection without answering: it may have acted.
  resetting = createServer((req) => {
    resetSeen++;
    req.resume();
    req.on('end', () => req.socket.destroy());
  });
  await new Promise<void>((r) => resetting.listen(0, '127.0.0.1', r));
  resettingPort = (resetting.address() as AddressInfo).port;
  await forgetSharedKeySets(inject('redisUrl'), ks.issuer);
  gw = await startGatewayProcess(
    gatewayEnv(
      {
        services: {
          mail: `${a.url}, ${b.url}`,
          half: `http://127.0.0.1:${downPort},${b.url}`,
          later: `http://127.0.0.1:${laterPort}`,
          dead: `http://127.0.0.1:${downPort}`,
          risky: `http://127.0.0.1:${resettingPort},${a.url}`,
        },
        platform: ks,
        redisUrl: inject('redisUrl'),
      },
      { GATEWAY_UPSTREAM_RETRY_SECONDS: '2' },
    ),
  );
  token = await platformToken(ks, {
    email: 'u@example.com',
    scope: 'mcp:mail mcp:half mcp:later mcp:dead mcp:risky',
  });
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([ks?.close(), a?.close(), b?.close()]);
  resetting?.closeAllConnections();
  await new Promise((r) => resetting?.close(r));
});

describe('configuration', () => {
  const base = {
    PUBLIC_BASE_URL: 'https://mcp.example.com',
    GATEWAY_SERVICES: 'deals',
    GATEWAY_IDENTITY_SECRET: 's'.repeat(32),
    REDIS_URL: 'redis://127.0.0.1:6379',
  };
  it('takes a comma-separated list of upstreams with one base path', () => {
    const c = loadGatewayConfig({
      ...base,
      DEALS_MCP_UPSTREAM: 'http://deals-1:3000/x, http://deals-2:3000/x/',
    });
    expect(c.services[0]).toMatchObject({
      upstreamOrigins: ['http://deals-1:3000', 'http://deals-2:3000'],
      upstreamBasePath: '/x',
    });
  });

  it('refuses different base paths, a repeated upstream, an empty list and a bad URL, naming the variable', () => {
    const bad = (v: string) => () => loadGatewayConfig({ ...base, DEALS_MCP_UPSTREAM: v });
    expect(bad('http://a:1/x,http://b:1/y')).toThrow(/DEALS_MCP_UPSTREAM.*same path/);
    expect(bad('http://a:1,http://a:1/')).toThrow(/DEALS_MCP_UPSTREAM.*twice/);
    expect(bad(' , ')).toThrow(/DEALS_MCP_UPSTREAM/);
    expect(bad('http://a:1,ftp://b')).toThrow(/DEALS_MCP_UPSTREAM.*http/);
  });
});

describe('spreading and failing over', () => {
  it('spreads requests over the replicas in turn', async () => {
    const before = [a.requests.length, b.requests.length];
    for (let i = 0; i < 10; i++) {
      const r = await call(`${gw.url}/mail/mcp`, { method: 'POST', token });
      expect(r.status).toBe(200);
    }
    expect(a.requests.length - before[0]!).toBe(5);
    expect(b.requests.length - before[1]!).toBe(5);
  });

  it('passes over a replica that refuses connections: every request succeeds on the other', async () => {
    const before = b.requests.length;
    for (let i = 0; i < 6; i++) {
      const r = await call(`${gw.url}/half/mcp`, { method: 'POST', token });
      expect(r.status).toBe(200);
    }
    expect(b.requests.length - before).toBe(6);
  });

  it('holds a request while every replica is down and delivers it when one comes up within the window', async () => {
    const pending = call(`${gw.url}/later/mcp`, {
      method: 'POST',
      token,
      body: '{"jsonrpc":"2.0","id":7,"method":"ping"}',
    });
    await new Promise((r) => setTimeout(r, 600));
    const late = await startUpstream(laterPort);
    try {
      const r = await pending;
      expect(r.status).toBe(200);
      expect(late.requests).toHaveLength(1);
      expect(late.requests[0]!.body).toBe('{"jsonrpc":"2.0","id":7,"method":"ping"}');
    } finally {
      await late.close();
    }
  });

  it('answers 503 UPSTREAM_UNAVAILABLE once the window has passed with no replica up', async () => {
    const started = Date.now();
    const r = await call(`${gw.url}/dead/mcp`, { method: 'POST', token });
    const took = Date.now() - started;
    expect(r.status).toBe(503);
    expect(errorOf(r)).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', reason: 'upstream_unreachable' });
    expect(took).toBeGreaterThanOrEqual(1500);
  });

  it('never sends again a request a replica may have started (connection dropped after the request)', async () => {
    const onA = a.requests.length;
    const seen = resetSeen;
    // Two requests: round-robin sends one of them to the dropping replica first.
    const results = [
      await call(`${gw.url}/risky/mcp`, { method: 'POST', token }),
      await call(`${gw.url}/risky/mcp`, { method: 'POST', token }),
    ];
    expect(resetSeen - seen).toBe(1);
    expect(results.map((r) => r.status).sort()).toEqual([200, 503]);
    expect(errorOf(results.find((r) => r.status === 503)!)).toMatchObject({ reason: 'upstream_failed' });
    // The refused one was not replayed on the healthy replica: it saw only the other request.
    expect(a.requests.length - onA).toBe(1);
  });
});

describe('MCP 2026-07-28 request headers', () => {
  const callBody = (name: string) =>
    JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name, arguments: {} } });

  it('forwards a request whose Mcp-Method and Mcp-Name agree with the body', async () => {
    const r = await call(`${gw.url}/mail/mcp`, {
      method: 'POST',
      token,
      headers: { 'mcp-method': 'tools/call', 'mcp-name': 'send_mail' },
      body: callBody('send_mail'),
    });
    expect(r.status).toBe(200);
    expect(r.json.headers).toMatchObject({ 'mcp-method': 'tools/call', 'mcp-name': 'send_mail' });
  });

  it('refuses 400 with JSON-RPC −32020 when Mcp-Method, Mcp-Name disagree with the body or Mcp-Name is missing', async () => {
    const cases: Array<[Record<string, string>, string, RegExp]> = [
      [{ 'mcp-method': 'tools/list' }, callBody('send_mail'), /Mcp-Method header value 'tools\/list'/],
      [
        { 'mcp-method': 'tools/call', 'mcp-name': 'whoami' },
        callBody('send_mail'),
        /Mcp-Name header value 'whoami'/,
      ],
      [{ 'mcp-method': 'tools/call' }, callBody('send_mail'), /Mcp-Name header is required/],
      [{ 'mcp-method': 'tools/call', 'mcp-name': '=?base64?!!?=' }, callBody('send_mail'), /invalid Base64/],
      [{ 'mcp-method': 'tools/list' }, '[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', /single JSON-RPC/],
    ];
    const before = a.requests.length + b.requests.length;
    for (const [headers, body, message] of cases) {
      const r = await call(`${gw.url}/mail/mcp`, { method: 'POST', token, headers, body });
      expect(r.status).toBe(400);
      expect(r.json.jsonrpc).toBe('2.0');
      expect(r.json.error.code).toBe(-32020);
      expect(r.json.error.message).toMatch(message);
    }
    expect(a.requests.length + b.requests.length).toBe(before);
  });

  it('decodes a Base64 Mcp-Name (a name unsafe in a header) before comparing', async () => {
    const name = 'grüße tool';
    const encoded = `=?base64?${Buffer.from(name).toString('base64')}?=`;
    expect(decodeHeaderValue(encoded)).toBe(name);
    const r = await call(`${gw.url}/mail/mcp`, {
      method: 'POST',
      token,
      headers: { 'mcp-method': 'tools/call', 'mcp-name': encoded },
      body: callBody(name),
    });
    expect(r.status).toBe(200);
  });

  it('reads requests of earlier revisions (no Mcp-Method) from the body: forwarded as they are', async () => {
    const r = await call(`${gw.url}/mail/mcp`, { method: 'POST', token, body: callBody('anything') });
    expect(r.status).toBe(200);
  });
});
