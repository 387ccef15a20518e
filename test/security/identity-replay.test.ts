// Attack: someone who can read traffic behind the gateway (a compromised tool server, a debugging proxy, a log of
// request headers) captures a set of identity headers and replays them — to another tool server, or to the same
// one with another method, path or body. Identity signature v2 binds the headers to the service (its own key),
// the method, the path with query and the body's SHA-256, so every such replay is 401 UNAUTHORIZED; only the
// exact same request within 60 s passes (out of scope: docs/security.md).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { deriveIdentityKey } from '../../lib/identity.ts';
import {
  type GatewayProcess,
  IDENTITY_SECRET,
  mintHs256,
  type RecordedRequest,
  startGatewayProcess,
  startUpstream,
  type Upstream,
} from '../gateway/helpers.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { freePort, type RunningProcess, startPlatform } from '../helpers/processes.ts';

const BASE = 'https://mcp.replay.test';
const SECRET = 'replay-test-platform-shared-secret-0123456789';
const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'replay', version: '0' } },
});

let db: TestDatabase;
let user: SeededUser;
let recorder: Upstream;
let gateway: GatewayProcess;
const tools: Record<string, { url: string; process: RunningProcess }> = {};

async function startTool(name: string): Promise<void> {
  const port = await freePort();
  const p = startPlatform(['tool', name], {
    DATABASE_URL: db.url,
    TOOL_IDENTITY_KEY: deriveIdentityKey(IDENTITY_SECRET, name),
    [`${name.toUpperCase()}_MCP_PORT`]: String(port),
  });
  tools[name] = { url: `http://127.0.0.1:${port}`, process: p };
  await p.waitFor(new RegExp(`${name} tool server listening`), 20_000);
}

beforeAll(async () => {
  db = await createTestDatabase();
  user = await seedUser(db.pool);
  recorder = await startUpstream();
  await Promise.all([startTool('platform'), startTool('mail')]);
  // The gateway fronts `platform` with the recording upstream: what it records is exactly what the real
  // platform tool server would have received.
  gateway = await startGatewayProcess({
    PUBLIC_BASE_URL: BASE,
    GATEWAY_SERVICES: 'platform',
    PLATFORM_MCP_UPSTREAM: recorder.url,
    PLATFORM_MCP_SHARED_SECRET: SECRET,
    REDIS_URL: inject('redisUrl'),
  });
}, 60_000);

afterAll(async () => {
  await Promise.all([gateway?.stop(), ...Object.values(tools).map((t) => t.process.stop())]);
  await recorder?.close();
  await db?.drop();
});

/** A real request through the gateway, captured at the upstream. */
async function capture(): Promise<RecordedRequest> {
  const now = Math.floor(Date.now() / 1000);
  const token = await mintHs256(SECRET, {
    iss: 'platform',
    aud: `${BASE}/platform/mcp`,
    sub: user.sub,
    email: user.email,
    scope: 'mcp:platform',
    jti: randomUUID(),
    iat: now,
    exp: now + 600,
  });
  const res = await fetch(`${gateway.url}/platform/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: INIT,
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return recorder.requests.at(-1)!;
}

/** The captured identity headers (and the MCP ones a client would send), replayed as given. */
function replayHeaders(r: RecordedRequest): Record<string, string> {
  const out: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  for (const [k, v] of Object.entries(r.headers)) {
    if ((k.startsWith('x-platform-') || k === 'x-request-id') && typeof v === 'string') out[k] = v;
  }
  return out;
}

async function replay(
  tool: string,
  path: string,
  init: { method: string; body?: string; headers: Record<string, string> },
) {
  const res = await fetch(`${tools[tool]!.url}${path}`, init);
  const text = await res.text();
  let code: string | undefined;
  try {
    code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
  } catch {
    // an SSE or empty body
  }
  return { status: res.status, code };
}

describe('identity headers captured behind the gateway and replayed', () => {
  it('the exact request (same service, method, path and body, within 60 s) is accepted: the control', async () => {
    const r = await capture();
    expect(r.headers['x-platform-identity']).toMatch(/^t=\d+,v3=[0-9a-f]{64}$/);
    const same = await replay('platform', '/platform/mcp', {
      method: 'POST',
      body: r.body,
      headers: replayHeaders(r),
    });
    expect(same.status).toBe(200);
  });

  it('sent to another tool server: 401 UNAUTHORIZED', async () => {
    const r = await capture();
    const other = await replay('mail', '/mail/mcp', {
      method: 'POST',
      body: r.body,
      headers: replayHeaders(r),
    });
    expect(other).toEqual({ status: 401, code: 'UNAUTHORIZED' });
  });

  it('sent to the same tool server with another method, path, query or body: 401 UNAUTHORIZED each', async () => {
    const r = await capture();
    const headers = replayHeaders(r);
    const cases: Array<[string, string, { method: string; body?: string }]> = [
      ['GET (event stream)', '/platform/mcp', { method: 'GET' }],
      ['DELETE (session end)', '/platform/mcp', { method: 'DELETE' }],
      ['another query', '/platform/mcp?replayed=1', { method: 'POST', body: r.body }],
      [
        'another body',
        '/platform/mcp',
        { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) },
      ],
      ['the same body re-serialised', '/platform/mcp', { method: 'POST', body: `${r.body} ` }],
    ];
    for (const [what, path, init] of cases) {
      expect(await replay('platform', path, { ...init, headers }), what).toEqual({
        status: 401,
        code: 'UNAUTHORIZED',
      });
    }
  });
});
