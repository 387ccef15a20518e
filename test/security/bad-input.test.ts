// Red team: "a NUL in an admin audit filter → 500 (and a cut export); ~10 000 levels of JSON nesting → 500 from
// a tool server (stack overflow inside the MCP SDK's request conversion)". Now: a control character in any query
// parameter of the admin API or the console → 400 in that surface's error shape; a JSON body nested deeper than
// 64 levels → 400 at the gateway (its error body) and at the tool server (JSON-RPC −32700), never a 500.
// Real processes: `platform idp`, `platform gateway`, `platform tool platform`.
import { randomUUID } from 'node:crypto';
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
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { sessionCookieName, signIn } from '../helpers/oauth.ts';
import {
  freePort,
  type IdpProcess,
  type RunningProcess,
  startIdpProcess,
  startPlatform,
} from '../helpers/processes.ts';
import { identityFor, signedHeaders, toolKey } from '../tools/helpers.ts';

const BASE = 'https://mcp.bad-input.test';
const SECRET = 'bad-input-test-mail-shared-secret-0123456789';

let db: TestDatabase;
let idp: IdpProcess;
let admin: SeededUser;
let adminToken: string;
let upstream: Upstream;
let gateway: GatewayProcess;
let tool: RunningProcess;
let toolUrl: string;

beforeAll(async () => {
  db = await createTestDatabase();
  admin = await seedUser(db.pool);
  const toolPort = await freePort();
  toolUrl = `http://127.0.0.1:${toolPort}`;
  tool = startPlatform(['tool', 'platform'], {
    DATABASE_URL: db.url,
    TOOL_IDENTITY_KEY: toolKey('platform'),
    PLATFORM_MCP_PORT: String(toolPort),
  });
  [idp, upstream] = await Promise.all([
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl: inject('redisUrl'),
      env: { PLATFORM_ADMIN_EMAILS: admin.email },
    }),
    startUpstream(),
    tool.waitFor(/platform tool server listening/),
  ]);
  gateway = await startGatewayProcess({
    PUBLIC_BASE_URL: BASE,
    GATEWAY_SERVICES: 'mail',
    MAIL_MCP_UPSTREAM: upstream.url,
    MAIL_MCP_SHARED_SECRET: SECRET,
    REDIS_URL: inject('redisUrl'),
  });
  adminToken = (await signIn(idp.issuer, admin.sessionToken, { scope: 'openid email platform:admin' }))
    .access_token;
});

afterAll(async () => {
  await gateway?.stop();
  await tool?.stop();
  await idp?.stop();
  await upstream?.close();
  await db?.drop();
});

/** Control characters as they arrive percent-encoded: C0 (NUL, SOH, TAB, LF, US), DEL, C1 (U+0080, U+009F). */
const CONTROLS = ['%00', '%01', '%09', '%0A', '%1F', '%7F', '%C2%80', '%C2%9F'];

describe('a control character in a query parameter of the admin API', () => {
  const get = (path: string) =>
    fetch(`${idp.issuer}${path}`, { headers: { authorization: `Bearer ${adminToken}` } });

  it('is 400 invalid_request in the API error shape, on every route, in values and in names', async () => {
    const paths = (c: string) => [
      `/admin/api/audit?email=a${c}b%40example.com`,
      `/admin/api/audit?client_id=${c}`,
      `/admin/api/audit?since=2026-01-01${c}`,
      `/admin/api/audit?email${c}=x`,
      `/admin/api/audit/per-hour?hours=4${c}`,
      `/admin/api/users?email=ab${c}`,
    ];
    for (const c of CONTROLS) {
      for (const path of paths(c)) {
        const res = await get(path);
        expect({ path, status: res.status }).toEqual({ path, status: 400 });
        expect(res.headers.get('content-type'), path).toMatch(/^application\/json/);
        expect(await res.json(), path).toEqual({
          error: 'invalid_request',
          error_description: 'query parameters must not contain control characters',
        });
      }
    }
  });

  it('refuses an export before it starts: a 400, never a 200 cut short', async () => {
    for (const format of ['csv', 'jsonl']) {
      const res = await get(`/admin/api/audit.${format}?email=a%00@example.com`);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: 'invalid_request' });
    }
    // The same export without the NUL streams whole.
    const ok = await get('/admin/api/audit.csv?email=a@example.com');
    expect(ok.status).toBe(200);
    expect(await ok.text()).toMatch(/^[^\r\n]+\r\n/);
  });

  it('in a path segment (decoded) too', async () => {
    const res = await get('/admin/api/users/a%00b%40example.com');
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: 'invalid_request' });
  });

  it('without an admin token the answer stays 401: nothing is said before authentication', async () => {
    expect((await fetch(`${idp.issuer}/admin/api/audit?email=%00`)).status).toBe(401);
  });
});

describe('a control character in a query parameter of the console', () => {
  const page = (path: string) =>
    fetch(`${idp.issuer}${path}`, {
      headers: { cookie: `${sessionCookieName(idp.issuer)}=${admin.sessionToken}` },
      redirect: 'manual',
    });

  it('is a 400 page like its other 400s, on pages, exports and the flash line', async () => {
    for (const c of CONTROLS) {
      for (const path of [
        `/admin/audit?email=a${c}b@example.com`,
        `/admin/audit.csv?email=${c}`,
        `/admin/audit.jsonl?service=mail${c}`,
        `/admin/users?email=ab${c}`,
        `/admin?flash=hello${c}&sig=x`,
      ]) {
        const res = await page(path);
        const body = await res.text();
        expect({ path, status: res.status }).toEqual({ path, status: 400 });
        expect(res.headers.get('content-type'), path).toMatch(/^text\/html/);
        expect(body, path).toContain('query parameters must not contain control characters');
      }
    }
  });
});

describe('JSON nested deeper than 64 levels', () => {
  const deep = (levels: number) => {
    // A real tools/call whose arguments nest: object, params, arguments, then arrays to `levels` in total.
    const inner = `${'['.repeat(levels - 3)}1${']'.repeat(levels - 3)}`;
    return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{"x":${inner}}}}`;
  };

  it('at the gateway: 400 BAD_REQUEST json_too_deep, nothing forwarded; 64 levels pass', async () => {
    const now = Math.floor(Date.now() / 1000);
    const token = await mintHs256(SECRET, {
      iss: 'mail',
      aud: `${BASE}/mail/mcp`,
      sub: `deep-${randomUUID()}`,
      email: 'deep@example.com',
      iat: now,
      exp: now + 600,
    });
    const before = upstream.requests.length;
    for (const body of [deep(10_000), deep(65), `[${deep(65)}]`]) {
      const framings: Array<Record<string, string>> = [
        {},
        { 'content-type': 'text/plain' },
        { 'transfer-encoding': 'chunked' },
      ];
      for (const headers of framings) {
        const r = await call(`${gateway.url}/mail/mcp`, { method: 'POST', token, body, headers });
        expect(r.status).toBe(400);
        expect(errorOf(r)).toMatchObject({ code: 'BAD_REQUEST', reason: 'json_too_deep' });
      }
    }
    expect(upstream.requests.length).toBe(before);
    const ok = await call(`${gateway.url}/mail/mcp`, { method: 'POST', token, body: deep(64) });
    expect(ok.status).toBe(200);
    expect(upstream.requests.length).toBe(before + 1);
  });

  it('at the tool server: 400 with a JSON-RPC parse error (−32700), before the SDK; 64 levels are served', async () => {
    const identity = identityFor(admin);
    const send = (body: string) =>
      fetch(`${toolUrl}/platform/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-06-18',
          ...signedHeaders(identity, { url: `${toolUrl}/platform/mcp`, body }),
        },
        body,
      });
    for (const body of [deep(10_000), deep(65)]) {
      const res = await send(body);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32700, message: 'Parse error: JSON nested deeper than 64 levels' },
      });
    }
    const ok = await send(deep(64));
    expect(ok.status).toBeLessThan(500);
    expect(await ok.text()).not.toContain('nested deeper');
    // And the server is still up.
    expect((await fetch(`${toolUrl}/health`)).status).toBe(200);
  });
});
