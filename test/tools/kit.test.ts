// The shared server kit, through the `platform` server: routes, the identity and provisioning checks and
// their error body, the host guard, stateless MCP for both protocol eras, and a database outage degrading.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Pool } from '../../lib/db.ts';
import { deriveIdentityKey, type Identity } from '../../lib/identity.ts';
import { createLogger } from '../../lib/logger.ts';
import { createProvisioningCheck } from '../../tools/kit/provisioning.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import {
  connectMcp,
  type InProcessServer,
  identityFor,
  type PostgresRelay,
  signedHeaders,
  startInProcess,
  startPostgresRelay,
  toolJson,
} from './helpers.ts';

let db: TestDatabase;
let user: SeededUser;
let relay: PostgresRelay;
let server: InProcessServer;

beforeAll(async () => {
  db = await createTestDatabase();
  user = await seedUser(db.pool);
  relay = await startPostgresRelay(db.url);
  // No users cache here: the outage test below needs every request to ask the database.
  server = await startInProcess(
    'platform',
    {
      DATABASE_URL: relay.url,
      PLATFORM_MCP_ALLOWED_HOSTS: '127.0.0.1:*,tools.internal:3000',
      PLATFORM_MCP_ALLOWED_ORIGINS: 'https://platform.example.com',
    },
    { usersCacheMs: 0 },
  );
});

afterAll(async () => {
  await server?.close();
  await relay?.close();
  await db?.drop();
});

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
};

/** Identity headers for a POST of `body` to the MCP endpoint (what the gateway would sign for it). */
function sign(
  identity: Identity,
  body: unknown = INIT,
  opts: Parameters<typeof signedHeaders>[2] = {},
): Record<string, string> {
  return signedHeaders(identity, { url: server.mcpUrl, method: 'POST', body: JSON.stringify(body) }, opts);
}

function post(headers: Record<string, string>, body: unknown = INIT): Promise<Response> {
  return fetch(server.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

async function expect401(res: Response, code: string, reason: RegExp): Promise<void> {
  expect(res.status).toBe(401);
  const body = (await res.json()) as { error: Record<string, unknown> };
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'context', 'message']);
  expect(body.error.code).toBe(code);
  expect(body.error.message).toMatch(reason);
  const context = body.error.context as Record<string, unknown>;
  expect(Object.keys(context).sort()).toEqual(['reason', 'request_id']);
  expect(context.reason).toBe(body.error.message);
  expect(context.request_id).toBe(res.headers.get('x-request-id'));
}

describe('routes', () => {
  it('answers GET and HEAD on /health and /platform/health without identity', async () => {
    for (const path of ['/health', '/platform/health']) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'ok' });
      const head = await fetch(`${server.url}${path}`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-type')).toBe('application/json');
      expect(await head.text()).toBe('');
    }
  });

  it('serves MCP only under the service prefix, and names the allowed methods', async () => {
    expect((await fetch(`${server.url}/mcp`, { method: 'POST' })).status).toBe(404);
    expect((await fetch(`${server.url}/mail/mcp`, { method: 'POST' })).status).toBe(404);
    const res = await fetch(server.mcpUrl, {
      method: 'PUT',
      headers: signedHeaders(identityFor(user), { url: server.mcpUrl, method: 'PUT' }),
    });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST, GET, DELETE');
  });
});

describe('identity from the gateway signature only', () => {
  it('refuses a request without the signature: 401 UNAUTHORIZED with the error body', async () => {
    await expect401(await post({}), 'UNAUTHORIZED', /identity signature missing/);
  });

  it('refuses unsigned identity headers even when they name a real user', async () => {
    const h = sign(identityFor(user));
    delete h['x-platform-identity'];
    await expect401(await post(h), 'UNAUTHORIZED', /missing/);
  });

  it('refuses a forged signature (other key) and a tampered header', async () => {
    await expect401(
      await post(
        sign(identityFor(user), INIT, { key: deriveIdentityKey('another-secret'.repeat(3), 'platform') }),
      ),
      'UNAUTHORIZED',
      /invalid/,
    );
    const h = sign(identityFor(user));
    h['x-platform-user-email'] = 'someone-else@example.com';
    await expect401(await post(h), 'UNAUTHORIZED', /invalid/);
  });

  it('refuses a signature older than 60 s', async () => {
    const t = Math.floor(Date.now() / 1000) - 61;
    await expect401(await post(sign(identityFor(user), INIT, { t })), 'UNAUTHORIZED', /expired/);
  });

  it('logs the refusal as a warning with the reason and the path', async () => {
    await post({});
    const line = server.logs().find((l) => l.msg === 'request refused' && l.code === 'UNAUTHORIZED');
    expect(line).toMatchObject({ level: 40, path: '/platform/mcp', reason: 'identity signature missing' });
  });

  it('answers USER_NOT_PROVISIONED for a validly signed caller without a users row', async () => {
    const ghost = identityFor({ email: 'ghost@example.com', sub: 'ghost-sub' });
    await expect401(await post(sign(ghost)), 'USER_NOT_PROVISIONED', /ghost@example\.com/);
  });

  it('matches the users row case-insensitively', async () => {
    const res = await post(sign(identityFor({ ...user, email: user.email.toUpperCase() })));
    expect(res.status).toBe(200);
    await res.body?.cancel();
  });
});

describe('host and origin guard', () => {
  it('answers 421 for a Host outside the patterns, and accepts a listed host:port', async () => {
    // fetch() may not set Host; node:http can.
    const send = (host: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(
          server.mcpUrl,
          {
            method: 'POST',
            headers: {
              host,
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              ...sign(identityFor(user)),
            },
          },
          (res) => {
            let body = '';
            res.on('data', (d) => {
              body += d;
            });
            res.on('end', () => resolve({ status: res.statusCode!, body }));
          },
        );
        req.once('error', reject);
        req.end(JSON.stringify(INIT));
      });
    const bad = await send('evil.example:3000');
    expect(bad.status).toBe(421);
    expect(JSON.parse(bad.body).error.message).toBe('Invalid Host header: evil.example:3000');
    expect((await send('tools.internal:3001')).status).toBe(421);
    expect((await send('tools.internal:3000')).status).toBe(200);
  });

  it('answers 403 for a present Origin that is not allowed, and accepts an allowed one', async () => {
    const bad = await post({ origin: 'https://evil.example', ...sign(identityFor(user)) });
    expect(bad.status).toBe(403);
    await bad.body?.cancel();
    const good = await post({ origin: 'https://platform.example.com', ...sign(identityFor(user)) });
    expect(good.status).toBe(200);
    await good.body?.cancel();
  });
});

describe('MCP, both protocol eras, no sessions', () => {
  for (const era of ['modern', 'legacy'] as const) {
    it(`${era} client: lists the tools and calls whoami as the signed caller, with no session id`, async () => {
      const id = identityFor(user, { issuer: 'entra', scope: 'mcp.access', clientId: 'connector-app' });
      const mcp = await connectMcp(server.mcpUrl, id, era);
      try {
        expect(mcp.protocolVersion()).toBe(era === 'modern' ? '2026-07-28' : '2025-11-25');
        expect(mcp.sessionId()).toBeUndefined();
        const tools = await mcp.listTools();
        expect(tools.map((t) => t.name)).toEqual(['whoami']);
        const r = await mcp.call('whoami');
        expect(r.isError).toBeFalsy();
        expect(toolJson(r)).toEqual({
          email: user.email,
          sub: user.sub,
          issuer: 'entra',
          scope: 'mcp.access',
          client_id: 'connector-app',
        });
      } finally {
        await mcp.close();
      }
    });

    it(`${era} client: takes the identity from each request`, async () => {
      const other = await seedUser(db.pool);
      const mcp = await connectMcp(server.mcpUrl, identityFor(user), era);
      try {
        mcp.actAs(identityFor(other, { clientId: 'second-client' }));
        expect(toolJson(await mcp.call('whoami'))).toMatchObject({
          email: other.email,
          client_id: 'second-client',
        });
      } finally {
        await mcp.close();
      }
    });
  }

  it('answers a 2025 request without a session, and ignores a session id it never gave', async () => {
    const req = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    const h = { ...sign(identityFor(user), req), 'mcp-protocol-version': '2025-11-25' };
    const list = await post(h, req);
    expect(list.status).toBe(200);
    expect(list.headers.get('mcp-session-id')).toBeNull();
    const withId = await post(
      { ...sign(identityFor(user), req), 'mcp-session-id': '00000000-0000-4000-8000-000000000000' },
      req,
    );
    expect(withId.status).toBe(200);
    await Promise.all([list.body?.cancel(), withId.body?.cancel()]);
  });

  it('initialize answers without Mcp-Session-Id; GET and DELETE answer 405 (no sessions, no event stream)', async () => {
    const init = await post(sign(identityFor(user)));
    expect(init.status).toBe(200);
    expect(init.headers.get('mcp-session-id')).toBeNull();
    await init.body?.cancel();
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(server.mcpUrl, {
        method,
        headers: {
          accept: 'text/event-stream',
          ...signedHeaders(identityFor(user), { url: server.mcpUrl, method }),
        },
      });
      expect(res.status).toBe(405);
      await res.body?.cancel();
    }
  });

  it('2026-07-28: tools/list carries resultType and the cache hint; server/discover needs no handshake', async () => {
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' },
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const listReq = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: meta } };
    const h = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' };
    const list = await post({ ...h, ...sign(identityFor(user), listReq) }, listReq);
    expect(list.status).toBe(200);
    const body = (await list.json()) as { result: Record<string, unknown> };
    expect(body.result).toMatchObject({ resultType: 'complete', ttlMs: 300000, cacheScope: 'private' });
    const againReq = { ...listReq, id: 9 };
    const again = (await (await post({ ...h, ...sign(identityFor(user), againReq) }, againReq)).json()) as {
      result: unknown;
    };
    expect(JSON.stringify(again.result)).toBe(JSON.stringify(body.result));

    const discoverReq = { jsonrpc: '2.0', id: 2, method: 'server/discover', params: { _meta: meta } };
    const discover = await post(
      {
        ...sign(identityFor(user), discoverReq),
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'server/discover',
      },
      discoverReq,
    );
    expect(discover.status).toBe(200);
    const d = (await discover.json()) as { result: { supportedVersions: string[] } };
    expect(d.result.supportedVersions).toContain('2026-07-28');
  });

  it('2026-07-28: refuses Mcp-Method / Mcp-Name that disagree with the body (400, -32020)', async () => {
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' },
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const call = {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'whoami', arguments: {}, _meta: meta },
    };
    const base = { 'mcp-protocol-version': '2026-07-28' };
    const wrongMethod = await post(
      { ...sign(identityFor(user), call), ...base, 'mcp-method': 'tools/list', 'mcp-name': 'whoami' },
      call,
    );
    expect(wrongMethod.status).toBe(400);
    expect(await wrongMethod.json()).toMatchObject({ error: { code: -32020 } });
    const wrongName = await post(
      { ...sign(identityFor(user), call), ...base, 'mcp-method': 'tools/call', 'mcp-name': 'other' },
      call,
    );
    expect(wrongName.status).toBe(400);
    expect(await wrongName.json()).toMatchObject({ error: { code: -32020 } });
    const right = await post(
      { ...sign(identityFor(user), call), ...base, 'mcp-method': 'tools/call', 'mcp-name': 'whoami' },
      call,
    );
    expect(right.status).toBe(200);
    expect(await right.json()).toMatchObject({ result: { structuredContent: { email: user.email } } });
  });

  it('answers a JSON-RPC parse error for a body that is not JSON', async () => {
    const res = await fetch(server.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...signedHeaders(identityFor(user), { url: server.mcpUrl, body: '{not json' }),
      },
      body: '{not json',
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: -32700 } });
  });
});

describe('database down', () => {
  it('degrades: initialize still works, tool calls are tool errors, no 5xx, and it recovers', async () => {
    const mcp = await connectMcp(server.mcpUrl, identityFor(user));
    try {
      await relay.down();
      const r = await mcp.call('whoami');
      expect(r.isError).toBe(true);
      expect(toolJson(r)).toEqual({
        error: { code: 'database_unavailable', message: expect.stringMatching(/unavailable/), status: 503 },
      });
      // A new client can still connect while the database is down.
      const fresh = await post(sign(identityFor(user)));
      expect(fresh.status).toBe(200);
      await fresh.body?.cancel();
      expect(server.logs().some((l) => l.msg === 'tool degraded' && l.level === 40)).toBe(true);

      await relay.up();
      expect(toolJson(await mcp.call('whoami'))).toMatchObject({ email: user.email });
    } finally {
      await relay.up();
      await mcp.close();
    }
  });
});

describe('users cache', () => {
  it('remembers a found user for its lifetime (no query), then refuses a deleted user', async () => {
    const cached = await startInProcess('platform', { DATABASE_URL: relay.url }, { usersCacheMs: 1500 });
    const gone = await seedUser(db.pool);
    const mcp = await connectMcp(cached.mcpUrl, identityFor(gone));
    try {
      expect(toolJson(await mcp.call('whoami')).email).toBe(gone.email);
      // Within the lifetime the users table is not asked: with the database unreachable the call still works.
      await relay.down();
      expect(toolJson(await mcp.call('whoami')).email).toBe(gone.email);
      await relay.up();
      await db.pool.query('DELETE FROM users WHERE id = $1', [gone.id]);
      await new Promise((r) => setTimeout(r, 1600));
      await expect(mcp.call('whoami')).rejects.toThrow(/401|USER_NOT_PROVISIONED/);
    } finally {
      await relay.up();
      await mcp.close();
      await cached.close();
    }
  });

  it('concurrent requests of one caller share one lookup; the next request asks again', async () => {
    let queries = 0;
    const counting = new Proxy(db.pool, {
      get(target, key) {
        if (key === 'query') {
          return (...args: Parameters<Pool['query']>) => {
            queries++;
            return (target.query as (...a: unknown[]) => unknown)(...args);
          };
        }
        const v = Reflect.get(target, key);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    }) as Pool;
    // No cache: what is shared is the lookup in flight, never an earlier answer.
    const check = createProvisioningCheck(counting, { usersTable: 'users', cacheMs: 0 });
    const log = createLogger({ name: 'provisioning-test', level: 'silent' });
    const someone = await seedUser(db.pool);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => check(identityFor(someone), () => log)),
    );
    expect(answers.every((a) => a === 'verified')).toBe(true);
    expect(queries).toBe(1);
    await db.pool.query('DELETE FROM users WHERE id = $1', [someone.id]);
    await expect(check(identityFor(someone), () => log)).rejects.toThrow(/not provisioned/);
    expect(queries).toBe(2);
    const refused = await Promise.allSettled(
      Array.from({ length: 5 }, () => check(identityFor(someone), () => log)),
    );
    expect(refused.every((r) => r.status === 'rejected')).toBe(true);
    expect(queries).toBe(3);
  });

  it('never remembers an unknown user: one provisioned afterwards gets in at once', async () => {
    const cached = await startInProcess('platform', { DATABASE_URL: db.url }, { usersCacheMs: 60_000 });
    const later = { email: `later-${Date.now()}@example.com`, sub: 'later-sub' };
    try {
      await expect401(
        await fetch(cached.mcpUrl, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...signedHeaders(identityFor(later), { url: cached.mcpUrl, body: JSON.stringify(INIT) }),
          },
          body: JSON.stringify(INIT),
        }),
        'USER_NOT_PROVISIONED',
        /not provisioned/,
      );
      await db.pool.query('INSERT INTO users (name, email) VALUES ($1, $2)', ['Later', later.email]);
      const mcp = await connectMcp(cached.mcpUrl, identityFor(later));
      expect(toolJson(await mcp.call('whoami')).email).toBe(later.email);
      await mcp.close();
    } finally {
      await cached.close();
    }
  });
});

describe('lifecycle', () => {
  it('close() releases every database connection of the server', async () => {
    // A database of its own, so every connection to it with this application name is this server's.
    const own = await createTestDatabase();
    try {
      const ownUser = await seedUser(own.pool);
      const s = await startInProcess('platform', { DATABASE_URL: own.url });
      const mcp = await connectMcp(s.mcpUrl, identityFor(ownUser));
      await mcp.call('whoami');
      await mcp.close();
      const connections = async () =>
        (
          await own.pool.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'platform-tool-platform'`,
          )
        ).rows[0].n as number;
      expect(await connections()).toBeGreaterThan(0);
      await s.close();
      for (let i = 0; i < 50 && (await connections()) > 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(await connections()).toBe(0);
    } finally {
      await own.drop();
    }
  });
});
