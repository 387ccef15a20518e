// Attacks on the gateway's body reading, which must hold every body whole before it signs (the signature covers
// the body's SHA-256): a sender trickling a body to hold a request (and its memory) open → 408 once
// GATEWAY_BODY_TIMEOUT_MS has passed; a body past GATEWAY_MAX_BODY_BYTES, declared or chunked, on a protected
// or a public route (health, metadata) → 413. Neither ever reaches the tool server; both answer with the error body.
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
