// The proxying half: streaming both ways (SSE event by event), disconnects, pass-through headers, limits,
// request ids, keep-alive pooling, the upstream retry window and graceful shutdown.
import { randomUUID } from 'node:crypto';
import { type ClientRequest, type IncomingMessage, request } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../helpers/processes.ts';
import {
  call,
  errorOf,
  type GatewayProcess,
  type GatewayStack,
  platformToken,
  startGatewayProcess,
  startGatewayStack,
  startUpstream,
  type Upstream,
  verifyRecorded,
} from './helpers.ts';

const MAX_BODY = 64 * 1024;

let stack: GatewayStack;
let upstream: Upstream;
let latePort: number;
let gw: GatewayProcess;
let token: string;

const env = () =>
  stack.env({
    GATEWAY_SERVICES: 'mail,late',
    LATE_MCP_UPSTREAM: `http://127.0.0.1:${latePort}`,
    GATEWAY_MAX_BODY_BYTES: String(MAX_BODY),
    GATEWAY_UPSTREAM_RETRY_SECONDS: '5',
  });

beforeAll(async () => {
  [stack, latePort] = await Promise.all([startGatewayStack(inject('redisUrl')), freePort()]);
  upstream = stack.upstream;
  gw = await startGatewayProcess(env());
  token = await platformToken(stack.ks, { email: 'p@example.com', scope: 'mcp:mail mcp:late' });
});

afterAll(async () => {
  await gw?.stop();
  await stack?.stop();
});

/** Opens a request and resolves with the response as soon as its headers arrive. */
function open(
  path: string,
  headers: Record<string, string> = {},
): Promise<{ req: ClientRequest; res: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const req = request(`${gw.url}${path}`, {
      headers: { authorization: `Bearer ${token}`, ...headers },
      agent: false,
    });
    req.on('response', (res) => resolve({ req, res }));
    req.on('error', reject);
    req.end();
  });
}

function nextChunk(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => res.once('data', (c: Buffer) => resolve(c.toString('utf8'))));
}

describe('SSE', () => {
  it('relays an event stream event by event, uncompressed, with Mcp-Session-Id and Last-Event-ID passed through', async () => {
    const id = randomUUID();
    const { res } = await open(`/mail/sse/${id}`, {
      'last-event-id': 'evt-41',
      'accept-encoding': 'gzip, br',
    });
    const up = await upstream.waitForStream(id);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.headers['mcp-session-id']).toBe('sess-1');
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(upstream.requests.find((r) => r.url.endsWith(id))!.headers['last-event-id']).toBe('evt-41');
    // Each event arrives before the upstream writes the next one: nothing is buffered on the way.
    for (let i = 1; i <= 3; i++) {
      const got = nextChunk(res);
      up.write(`id: evt-${41 + i}\nevent: message\ndata: {"n":${i}}\n\n`);
      expect(await got).toBe(`id: evt-${41 + i}\nevent: message\ndata: {"n":${i}}\n\n`);
    }
    const ended = new Promise((r) => res.once('end', r));
    res.resume();
    up.end();
    await ended;
  });

  it('a client that disconnects closes the upstream stream', async () => {
    const id = randomUUID();
    const { req, res } = await open(`/mail/sse/${id}`);
    const up = await upstream.waitForStream(id);
    up.write('data: hello\n\n');
    expect(await nextChunk(res)).toBe('data: hello\n\n');
    req.destroy();
    await expect.poll(() => upstream.aborted.includes(`/mail/sse/${id}`)).toBe(true);
  });

  it('a client that disconnects before the upstream answered closes the upstream request', async () => {
    const path = `/mail/${randomUUID()}/hang`;
    const req = request(`${gw.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      agent: false,
    });
    req.on('error', () => {});
    req.end('{}');
    await expect.poll(() => upstream.requests.some((r) => r.url === path)).toBe(true);
    req.destroy();
    await expect.poll(() => upstream.aborted.includes(path)).toBe(true);
  });
});

describe('chunked answers', () => {
  it('a chunked JSON answer that arrived whole leaves in one write: headers, body and last chunk together', async () => {
    // Flushing the headers early is for event streams only; doing it for every answer without a length (the MCP
    // SDK's JSON answers) cost a write and a packet per request.
    const body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami"}}';
    const reads = await rawExchange(
      gw.url,
      `POST /mail/chunked HTTP/1.1\r\nHost: ${new URL(gw.url).host}\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    const text = reads.join('');
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).toMatch(/\r\ntransfer-encoding: chunked\r\n/i);
    expect(text).toContain(`"bodyLength":${body.length}`);
    expect(text.endsWith('\r\n0\r\n\r\n')).toBe(true);
    expect(reads.length).toBe(1);
  });
});

/** Sends one raw request and collects what the socket reads, read by read, until the server closes. */
function rawExchange(base: string, raw: string): Promise<string[]> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const reads: string[] = [];
    const socket = connect(Number(port), hostname, () => socket.write(raw));
    socket.on('data', (d: Buffer) => reads.push(d.toString('latin1')));
    socket.on('end', () => resolve(reads));
    socket.on('error', reject);
  });
}

describe('bodies and headers', () => {
  it('reads a chunked request body whole and forwards it unchanged with its length, signed over its hash', async () => {
    const body = 'x'.repeat(MAX_BODY - 10);
    const r = await call(`${gw.url}/mail/mcp`, {
      method: 'POST',
      token,
      body,
      headers: { 'transfer-encoding': 'chunked' },
    });
    expect(r.status).toBe(200);
    expect(r.json.bodyLength).toBe(body.length);
    expect(r.json.headers['transfer-encoding']).toBeUndefined();
    expect(r.json.headers['content-length']).toBe(String(body.length));
    expect(verifyRecorded(upstream.requests.at(-1)!)).toMatchObject({ issuer: 'platform' });
  });

  it('refuses bodies over the limit with 413, declared or streamed', async () => {
    const body = 'y'.repeat(MAX_BODY + 1);
    const declared = await call(`${gw.url}/mail/mcp`, { method: 'POST', token, body });
    expect(declared.status).toBe(413);
    expect(errorOf(declared)).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', reason: 'body_too_large' });
    const before = upstream.requests.length;
    const streamed = await call(`${gw.url}/mail/mcp`, {
      method: 'POST',
      token,
      body,
      headers: { 'transfer-encoding': 'chunked' },
    });
    expect(streamed.status).toBe(413);
    // Neither reached the upstream: bodies are read whole before anything is forwarded.
    expect(upstream.requests.length).toBe(before);
  });

  it('refuses oversized headers with 431', async () => {
    const r = await call(`${gw.url}/mail/mcp`, {
      method: 'POST',
      token,
      headers: { 'x-filler': 'z'.repeat(20_000) },
    }).catch(() => ({
      status: 431,
    }));
    expect(r.status).toBe(431);
  });

  it('passes response headers through (repeated Set-Cookie included) and adds only x-request-id', async () => {
    const r = await call(`${gw.url}/mail/mcp`, { method: 'POST', token });
    expect(r.status).toBe(200);
    const names = r.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    expect(names.filter((n) => n === 'set-cookie')).toHaveLength(2);
    expect(new Set(names)).toEqual(
      new Set([
        'content-type',
        'content-length',
        'mcp-session-id',
        'x-upstream',
        'set-cookie',
        'date',
        'x-request-id',
        'connection',
      ]),
    );
  });

  it('gives every request an id: in the response, to the upstream, and in error bodies', async () => {
    const ok = await call(`${gw.url}/mail/mcp`, { method: 'POST', token });
    const id = ok.headers['x-request-id'] as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(upstream.requests.at(-1)!.headers['x-request-id']).toBe(id);
    const refused = await call(`${gw.url}/mail/mcp`, { method: 'POST' });
    expect(errorOf(refused).requestId).toBe(refused.headers['x-request-id']);
    // A caller's id that could inject into logs or headers is replaced, not echoed.
    const odd = await call(`${gw.url}/mail/mcp`, {
      method: 'POST',
      token,
      headers: { 'x-request-id': 'a b<script>' },
    });
    expect(odd.headers['x-request-id']).not.toBe('a b<script>');
  });

  it('reuses upstream connections (keep-alive pool)', async () => {
    for (let i = 0; i < 20; i++)
      expect((await call(`${gw.url}/mail/mcp`, { method: 'POST', token })).status).toBe(200);
    const used = new Set(upstream.requests.slice(-20).map((r) => r.remotePort));
    expect(used.size).toBe(1);
  });
});

describe('upstream availability', () => {
  it('retries refused connections within the window: an upstream that comes up in time answers', async () => {
    const pending = call(`${gw.url}/late/mcp`, { method: 'POST', token });
    await new Promise((r) => setTimeout(r, 600));
    const late = await startUpstream(latePort);
    try {
      const r = await pending;
      expect(r.status).toBe(200);
      expect(r.json.url).toBe('/late/mcp');
      expect(r.json.bodyLength).toBeGreaterThan(0);
    } finally {
      await late.close();
    }
  });
});

describe('shutdown', () => {
  it('SIGTERM lets an in-flight request finish, then exits 0', async () => {
    const own = await startGatewayProcess(env());
    const inFlight = call(`${own.url}/mail/slow?ms=600`, { method: 'POST', token });
    await expect.poll(() => upstream.requests.some((r) => r.url === '/mail/slow?ms=600')).toBe(true);
    const exited = own.stop('SIGTERM');
    const r = await inFlight;
    expect(r.status).toBe(200);
    expect(await exited).toBe(0);
    expect(own.logs().some((l) => l.msg === 'stopped')).toBe(true);
  });
});
