// Attacks on the gateway's body reading, which must hold every body whole before it signs (the signature covers
// the body's SHA-256): a sender trickling a body to hold a request (and its memory) open → 408 once
// GATEWAY_BODY_TIMEOUT_MS has passed; a body past GATEWAY_MAX_BODY_BYTES, declared or chunked, on a protected
// or a public route (health, metadata) → 413. Neither ever reaches the tool server; both answer with the error body.
// Red team (lower): "anonymous slow bodies hold a gateway connection ~325 s": a request refused before its body
// is read (no bearer, bad token, wrong host, …) is answered and its connection closed at once, without waiting
// for the body; a request head trickled slowly is cut after GATEWAY_HEADERS_TIMEOUT_MS.
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  call,
  errorOf,
  type GatewayProcess,
  mintHs256,
  startGatewayProcess,
  startUpstream,
  type Upstream,
} from '../gateway/helpers.ts';

const BASE = 'https://mcp.bodies.test';
const SECRET = 'bodies-test-mail-shared-secret-0123456789abc';
const MAX = 4096;
const TIMEOUT_MS = 600;

let upstream: Upstream;
let gateway: GatewayProcess;
let token: string;

beforeAll(async () => {
  upstream = await startUpstream();
  gateway = await startGatewayProcess({
    PUBLIC_BASE_URL: BASE,
    GATEWAY_SERVICES: 'mail',
    MAIL_MCP_UPSTREAM: upstream.url,
    MAIL_MCP_SHARED_SECRET: SECRET,
    REDIS_URL: inject('redisUrl'),
    GATEWAY_MAX_BODY_BYTES: String(MAX),
    GATEWAY_BODY_TIMEOUT_MS: String(TIMEOUT_MS),
  });
  const now = Math.floor(Date.now() / 1000);
  token = await mintHs256(SECRET, {
    iss: 'mail',
    aud: `${BASE}/mail/mcp`,
    sub: `bodies-${randomUUID()}`,
    email: 'bodies@example.com',
    jti: randomUUID(),
    iat: now,
    exp: now + 600,
  });
});

afterAll(async () => {
  await gateway?.stop();
  await upstream?.close();
});

interface RawAnswer {
  status: number;
  body: string;
  elapsedMs: number;
}

/**
 * Sends `head` (request line and headers) and `first` of the body, then nothing more: the answer the gateway
 * gives without the rest (or a timeout of the test itself if it waits forever).
 */
function stall(head: string, first: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = connect(gateway.port, '127.0.0.1');
    let data = '';
    socket.on('data', (d) => {
      data += d.toString();
    });
    socket.on('error', reject);
    socket.on('close', () => {
      const [headPart = '', body = ''] = data.split('\r\n\r\n');
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(headPart)?.[1] ?? 0),
        body,
        elapsedMs: performance.now() - started,
      });
    });
    socket.write(`${head}\r\n\r\n${first}`);
  });
}

describe('a body that does not arrive in time', () => {
  it('is answered 408 REQUEST_TIMEOUT after GATEWAY_BODY_TIMEOUT_MS, the connection closed, nothing forwarded', async () => {
    const before = upstream.requests.length;
    const r = await stall(
      [
        'POST /mail/mcp HTTP/1.1',
        'host: 127.0.0.1',
        `authorization: Bearer ${token}`,
        'content-type: application/json',
        'content-length: 100',
      ].join('\r\n'),
      '{"jsonrpc":',
    );
    expect(r.status).toBe(408);
    expect(JSON.parse(r.body)).toMatchObject({
      error: { code: 'REQUEST_TIMEOUT', context: { reason: 'body_timeout' } },
    });
    expect(r.elapsedMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(upstream.requests.length).toBe(before);
  });

  it('a chunked body that stops mid-way gets the same', async () => {
    const r = await stall(
      [
        'POST /mail/mcp HTTP/1.1',
        'host: 127.0.0.1',
        `authorization: Bearer ${token}`,
        'transfer-encoding: chunked',
      ].join('\r\n'),
      '5\r\n{"jso\r\n',
    );
    expect(r.status).toBe(408);
  });
});

describe('a body over GATEWAY_MAX_BODY_BYTES', () => {
  const big = 'x'.repeat(MAX + 1);

  it('on the public routes (health, metadata, a service health), declared or chunked: 413, never forwarded', async () => {
    const before = upstream.requests.length;
    for (const path of ['/health', '/mail/.well-known/oauth-protected-resource', '/mail/health']) {
      // node:http frames a GET body only when told how: a declared length, or chunked.
      const framings: Array<Record<string, string>> = [
        { 'content-length': String(big.length) },
        { 'transfer-encoding': 'chunked' },
      ];
      for (const headers of framings) {
        const r = await call(`${gateway.url}${path}`, { method: 'GET', body: big, headers });
        expect(r.status, `${path} ${JSON.stringify(headers)}`).toBe(413);
        expect(errorOf(r)).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', reason: 'body_too_large' });
      }
    }
    expect(upstream.requests.length).toBe(before);
    // Within the limit the public routes answer as usual.
    const within = await call(`${gateway.url}/health`, {
      method: 'GET',
      body: 'x'.repeat(MAX),
      headers: { 'content-length': String(MAX) },
    });
    expect(within.status).toBe(200);
  });

  it('on a protected route, chunked (no declared length): 413 before anything is forwarded', async () => {
    const before = upstream.requests.length;
    const r = await call(`${gateway.url}/mail/mcp`, {
      method: 'POST',
      token,
      body: big,
      headers: { 'transfer-encoding': 'chunked' },
    });
    expect(r.status).toBe(413);
    expect(upstream.requests.length).toBe(before);
  });
});

describe('a request refused before its body is read (anonymous slow bodies)', () => {
  const BODY_TIMEOUT_MS = 4000;
  const HEADERS_TIMEOUT_MS = 1500;
  let defaults: GatewayProcess;

  beforeAll(async () => {
    // The default body limit (1 MiB), so a declared 1 MiB body is not refused for its size.
    defaults = await startGatewayProcess({
      PUBLIC_BASE_URL: BASE,
      GATEWAY_SERVICES: 'mail',
      MAIL_MCP_UPSTREAM: upstream.url,
      MAIL_MCP_SHARED_SECRET: SECRET,
      REDIS_URL: inject('redisUrl'),
      GATEWAY_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS),
      GATEWAY_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    });
  });

  afterAll(async () => {
    await defaults?.stop();
  });

  interface Trickle {
    status(): number;
    /** Resolves with how long the connection stayed open once the gateway closed it; rejects past `limitMs`. */
    closed(limitMs: number): Promise<number>;
  }

  /** Sends `head`, then the body a byte every 50 ms (it never ends: 1 MiB declared), reading what comes back. */
  function trickle(head: string): Trickle {
    const started = performance.now();
    const socket = connect(defaults.port, '127.0.0.1');
    let data = '';
    let closedAt: number | undefined;
    socket.on('data', (d) => {
      data += d.toString();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      closedAt = performance.now();
      clearInterval(timer);
    });
    socket.write(`${head}\r\n\r\n`);
    const timer = setInterval(() => {
      if (!socket.destroyed && socket.writable) socket.write('x');
    }, 50);
    return {
      status: () => Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0),
      closed: async (limitMs) => {
        try {
          await expect.poll(() => closedAt, { timeout: limitMs, interval: 50 }).toBeDefined();
        } finally {
          clearInterval(timer);
          socket.destroy();
        }
        return closedAt! - started;
      },
    };
  }

  const post = (extra: string[]) =>
    ['POST /mail/mcp HTTP/1.1', 'content-type: application/json', 'content-length: 1048576', ...extra].join(
      '\r\n',
    );

  for (const [what, head, status] of [
    ['no bearer', post(['host: 127.0.0.1']), 401],
    ['a bad token', post(['host: 127.0.0.1', 'authorization: Bearer not.a.token']), 401],
    ['a Host not allowed', post(['host: evil.example'])],
    ['an Origin not allowed', post(['host: 127.0.0.1', 'origin: https://evil.example']), 403],
    ['an unknown service', post(['host: 127.0.0.1']).replace('/mail/mcp', '/nothing/mcp'), 404],
    [
      'a public route with the wrong method',
      'POST /health HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 1048576',
      405,
    ],
  ] as Array<[string, string, number?]>) {
    it(`${what}: answered at once, the connection closed by the gateway within GATEWAY_BODY_TIMEOUT_MS`, async () => {
      const t = trickle(head);
      await t.closed(BODY_TIMEOUT_MS);
      expect(t.status()).toBe(status ?? 421);
    });
  }

  it('a request head trickled slowly: 408 and closed after GATEWAY_HEADERS_TIMEOUT_MS', async () => {
    const socket = connect(defaults.port, '127.0.0.1');
    let data = '';
    let closedAt: number | undefined;
    const started = performance.now();
    socket.on('data', (d) => {
      data += d.toString();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      closedAt = performance.now();
    });
    socket.write('POST /mail/mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n');
    const timer = setInterval(() => {
      if (!socket.destroyed && socket.writable) socket.write('x-slow: 1\r\n');
    }, 100);
    try {
      // Node checks the head's deadline once a second: closed within the limit plus that interval.
      await expect.poll(() => closedAt, { timeout: HEADERS_TIMEOUT_MS + 3000, interval: 50 }).toBeDefined();
    } finally {
      clearInterval(timer);
      socket.destroy();
    }
    expect(closedAt! - started).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
    expect(data).toMatch(/^HTTP\/1\.1 408/);
  });

  it('an authorised request on the same gateway still keeps its connection (keep-alive untouched)', async () => {
    const r = await call(`${defaults.url}/mail/mcp`, {
      method: 'POST',
      token,
      headers: { connection: 'keep-alive' },
    });
    expect(r.status).toBe(200);
    expect(r.headers.connection).toBe('keep-alive');
  });
});
