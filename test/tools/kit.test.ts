// The shared server kit, through the `platform` server: routes, the identity and provisioning checks and
// their error body, the host guard, MCP sessions bound to their caller, and a database outage degrading.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveIdentityKey, type Identity } from '../../lib/identity.ts';
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
  server = await startInProcess('platform', {
    DATABASE_URL: relay.url,
    PLATFORM_MCP_ALLOWED_HOSTS: '127.0.0.1:*,tools.internal:3000',
    PLATFORM_MCP_ALLOWED_ORIGINS: 'https://platform.example.com',
  });
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

describe('MCP sessions', () => {
  it('initializes with the real SDK client, lists the tools and calls whoami as the signed caller', async () => {
    const id = identityFor(user, { issuer: 'entra', scope: 'mcp.access', clientId: 'connector-app' });
    const mcp = await connectMcp(server.mcpUrl, id);
    try {
      expect(mcp.transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
      const { tools } = await mcp.client.listTools();
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

  it('takes the identity from each request, not from the session', async () => {
    const other = await seedUser(db.pool);
    const mcp = await connectMcp(server.mcpUrl, identityFor(user));
    try {
      // Same caller (sub, email), other token: the session continues and whoami shows the new request's claims.
      mcp.actAs(identityFor(user, { scope: 'mcp:platform', clientId: 'second-client' }));
      expect(toolJson(await mcp.call('whoami'))).toMatchObject({
        scope: 'mcp:platform',
        client_id: 'second-client',
      });
      // Another caller presenting this session id is treated like an unknown session.
      mcp.actAs(identityFor(other));
      await expect(mcp.call('whoami')).rejects.toThrow(/Session not found|404/);
    } finally {
      await mcp.client.close();
    }
  });

  it('refuses a non-initialize request without a session, and an unknown session id', async () => {
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    const noSession = await post(sign(identityFor(user), list), list);
    expect(noSession.status).toBe(400);
    expect(await noSession.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32000 } });
    const unknown = await post(
      { ...sign(identityFor(user), list), 'mcp-session-id': '00000000-0000-4000-8000-000000000000' },
      list,
    );
    expect(unknown.status).toBe(404);
    await unknown.body?.cancel();
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
      // A new session can still be opened while the database is down.
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

describe('lifecycle', () => {
  it('closes MCP sessions that stay idle past the limit', async () => {
    const short = await startInProcess('platform', { DATABASE_URL: db.url }, { sessionIdleMs: 100 });
    const mcp = await connectMcp(short.mcpUrl, identityFor(user));
    try {
      expect(toolJson(await mcp.call('whoami')).email).toBe(user.email);
      await new Promise((r) => setTimeout(r, 400));
      await expect(mcp.call('whoami')).rejects.toThrow(/Session not found|404/);
      expect(short.logs().some((l) => l.msg === 'MCP session closed' && l.why === 'idle')).toBe(true);
    } finally {
      await mcp.client.close();
      await short.close();
    }
  });

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
