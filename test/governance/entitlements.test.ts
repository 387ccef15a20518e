// Managed entitlements end to end: a running `platform idp` with PLATFORM_ENTITLEMENTS=managed and
// PLATFORM_ROLES_SQL over a roles table of this test's own, the gateway and the tool servers, the admin API
// (and `platform admin grant`) changing who gets which service, the real MCP SDK client calling through.
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { callAdminApi } from '../helpers/admin-api.ts';
import { createTestDatabase, type SeededUser, seedUser } from '../helpers/database.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { startPlatform, testSigningKeyPem } from '../helpers/processes.ts';
import { type Stack, startStack } from '../tools/stack.ts';

const ROLES_SQL = 'SELECT role FROM app_roles WHERE user_id = $1';
const ALL = 'openid email mcp:platform mcp:mail mcp:deals';

let stack: Stack;
let admin: SeededUser;
let adminToken: string;

beforeAll(async () => {
  const adminEmail = `admin-${randomUUID().slice(0, 8)}@example.com`;
  stack = await startStack({
    prepare: async (db) => {
      await db.pool.query('CREATE TABLE app_roles (user_id integer NOT NULL, role text NOT NULL)');
    },
    idpEnv: {
      PLATFORM_ENTITLEMENTS: 'managed',
      PLATFORM_ROLES_SQL: ROLES_SQL,
      PLATFORM_ADMIN_EMAILS: adminEmail,
    },
  });
  admin = await seedUser(stack.db.pool, { email: adminEmail });
  adminToken = (await signIn(stack.idp.issuer, admin.sessionToken, { scope: 'openid email platform:admin' }))
    .access_token;
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

const api = (method: string, path: string, body?: unknown) =>
  callAdminApi(stack.idp.issuer, adminToken, method, `/admin/api/${path}`, body);

const scopes = (token: string) => String(decodeJwt(token).scope).split(' ');

/** A raw JSON-RPC POST through the gateway: status and error body (refusals happen before the tool server). */
async function post(service: string, token: string) {
  const res = await fetch(`${stack.baseUrl}/${service}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  const text = await res.text();
  let reason: string | undefined;
  try {
    reason = (JSON.parse(text) as { error?: { context?: { reason?: string } } }).error?.context?.reason;
  } catch {
    // an SSE or JSON-RPC answer from the tool server
  }
  return { status: res.status, reason, challenge: res.headers.get('www-authenticate') };
}

/** The MCP SDK client through the gateway: whoami on the platform service, get_conflicts on deals. */
async function callTool(service: string, token: string, tool: string, args: Record<string, unknown> = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.baseUrl}/${service}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'entitlements-test', version: '1.0.0' });
  await client.connect(transport);
  try {
    return (await client.callTool({ name: tool, arguments: args })) as CallToolResult;
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
}

/** Polls until the gateway refuses the token as revoked; returns how long that took. */
async function refusedWithin(service: string, token: string, limitMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const r = await post(service, token);
    if (r.status === 401 && r.reason === 'token_revoked') return Date.now() - started;
    if (Date.now() - started > limitMs) throw new Error(`still ${r.status} ${r.reason} after ${limitMs} ms`);
    await new Promise((res) => setTimeout(res, 25));
  }
}

describe('managed entitlements', () => {
  it('no grant: no mcp:<service> in the token, and the gateway refuses it with 403', async () => {
    const user = await seedUser(stack.db.pool);
    const t = await signIn(stack.idp.issuer, user.sessionToken, { scope: ALL });
    expect(t.scope).toBe('openid email');
    expect(scopes(t.access_token)).not.toContain('mcp:deals');
    const r = await post('deals', t.access_token);
    expect(r.status).toBe(403);
    expect(r.challenge).toContain('error="insufficient_scope"');
    expect(r.challenge).toContain('scope="mcp:deals"');
  });

  it('grant: the next token carries the service; ungrant: the live token is refused within 1 s, the refresh is narrowed', async () => {
    const user = await seedUser(stack.db.pool);
    for (const service of ['deals', 'platform']) {
      const g = await api('POST', 'entitlements', { service, email: user.email.toUpperCase() });
      expect(g.status).toBe(200);
      expect(g.json).toMatchObject({ service, email: user.email, granted: true, created: true });
    }
    const listed = await api('GET', `entitlements?email=${encodeURIComponent(user.email)}`);
    expect(listed.json).toMatchObject({
      mode: 'managed',
      email: user.email,
      services: ['platform', 'deals'],
    });

    const t = await signIn(stack.idp.issuer, user.sessionToken, { scope: ALL });
    expect(t.scope.split(' ').sort()).toEqual(['email', 'mcp:deals', 'mcp:platform', 'openid']);
    const conflicts = await callTool('deals', t.access_token, 'get_conflicts', {
      deal_id: `d-${randomUUID()}`,
    });
    expect(conflicts.isError).toBeFalsy();

    const u = await api('DELETE', `entitlements?service=deals&email=${encodeURIComponent(user.email)}`);
    expect(u.status).toBe(200);
    expect(u.json).toMatchObject({ service: 'deals', removed: true, subjects: [user.sub] });
    const ms = await refusedWithin('deals', t.access_token, 1000);
    expect(ms).toBeLessThanOrEqual(1000);
    // Every live token of the user is cut (the cut-off is per user), including the platform one.
    expect((await post('platform', t.access_token)).status).toBe(401);

    // A cut-off refuses tokens issued at or before its second: the client's refresh comes after it.
    await new Promise((r) => setTimeout(r, 1100));
    const r = await refresh(stack.idp.issuer, t.refresh_token);
    expect(r.status).toBe(200);
    const fresh = String(r.json.access_token);
    expect(String(r.json.scope).split(' ').sort()).toEqual(['email', 'mcp:platform', 'openid']);
    expect(scopes(fresh)).not.toContain('mcp:deals');
    expect((await post('deals', fresh)).status).toBe(403);
    const who = await callTool('platform', fresh, 'whoami');
    expect(who.isError).toBeFalsy();

    // Granted again: the same refresh token brings the service back (refresh tokens keep their scope).
    await api('POST', 'entitlements', { service: 'deals', email: user.email });
    const again = await refresh(stack.idp.issuer, String(r.json.refresh_token));
    expect(String(again.json.scope).split(' ')).toContain('mcp:deals');
  });

  it('role grants through PLATFORM_ROLES_SQL: members get the service, others do not, an ungrant cuts members', async () => {
    const role = `sales-${randomUUID().slice(0, 6)}`;
    const member = await seedUser(stack.db.pool);
    const other = await seedUser(stack.db.pool);
    await stack.db.pool.query('INSERT INTO app_roles (user_id, role) VALUES ($1, $2), ($1, $3)', [
      member.id,
      role,
      'unrelated',
    ]);
    expect((await api('POST', 'entitlements', { service: 'mail', role })).status).toBe(200);

    const m = await signIn(stack.idp.issuer, member.sessionToken, { scope: ALL });
    expect(m.scope.split(' ')).toContain('mcp:mail');
    expect(
      (await signIn(stack.idp.issuer, other.sessionToken, { scope: ALL })).scope.split(' '),
    ).not.toContain('mcp:mail');
    const listed = await api('GET', `entitlements?email=${encodeURIComponent(member.email)}`);
    expect(listed.json).toMatchObject({ roles: [role, 'unrelated'].sort(), services: ['mail'] });

    const u = await api('DELETE', `entitlements?service=mail&role=${encodeURIComponent(role)}`);
    expect(u.json).toMatchObject({ removed: true, subjects: [member.sub] });
    await refusedWithin('mail', m.access_token, 1000);
  });

  it('an ungrant spares a user still entitled through a role', async () => {
    const role = `ops-${randomUUID().slice(0, 6)}`;
    const user = await seedUser(stack.db.pool);
    await stack.db.pool.query('INSERT INTO app_roles (user_id, role) VALUES ($1, $2)', [user.id, role]);
    await api('POST', 'entitlements', { service: 'deals', role });
    await api('POST', 'entitlements', { service: 'deals', email: user.email });
    const t = await signIn(stack.idp.issuer, user.sessionToken, { scope: ALL });
    const u = await api('DELETE', `entitlements?service=deals&email=${encodeURIComponent(user.email)}`);
    expect(u.json).toMatchObject({ removed: true, subjects: [], cutoff: null });
    await new Promise((r) => setTimeout(r, 300));
    expect((await post('deals', t.access_token)).status).not.toBe(401);
  });

  it("follows the user's current email: a renamed user keeps only the grants of the new email", async () => {
    const user = await seedUser(stack.db.pool);
    await api('POST', 'entitlements', { service: 'deals', email: user.email });
    const t = await signIn(stack.idp.issuer, user.sessionToken, { scope: ALL });
    expect(t.scope.split(' ')).toContain('mcp:deals');
    const renamed = `renamed-${randomUUID().slice(0, 8)}@example.com`;
    await stack.db.pool.query('UPDATE users SET email = $1 WHERE id = $2', [renamed, user.id]);
    const r = await refresh(stack.idp.issuer, t.refresh_token);
    expect(r.status).toBe(200);
    expect(String(r.json.scope).split(' ')).not.toContain('mcp:deals');
    await api('POST', 'entitlements', { service: 'deals', email: renamed });
    const again = await refresh(stack.idp.issuer, String(r.json.refresh_token));
    expect(String(again.json.scope).split(' ')).toContain('mcp:deals');
    expect(decodeJwt(String(again.json.access_token)).email).toBe(renamed);
  });

  it('refuses bad requests with invalid_request, and audits every change', async () => {
    expect((await api('POST', 'entitlements', { service: 'nope', email: 'a@example.com' })).json.error).toBe(
      'invalid_request',
    );
    expect((await api('POST', 'entitlements', { service: 'deals' })).json.error).toBe('invalid_request');
    expect(
      (await api('POST', 'entitlements', { service: 'deals', email: 'a@example.com', role: 'x' })).status,
    ).toBe(400);
    expect((await api('DELETE', 'entitlements?service=deals&email=not-an-email')).status).toBe(400);
    const { rows } = await stack.db.pool.query<{ action: string; actor: string }>(
      'SELECT action, actor FROM platform.entitlement_changes ORDER BY id',
    );
    expect(rows.length).toBeGreaterThanOrEqual(6);
    expect(new Set(rows.map((r) => r.actor))).toEqual(new Set([admin.email]));
    expect(new Set(rows.map((r) => r.action))).toEqual(new Set(['grant', 'ungrant']));
  });

  it('platform admin grant / entitlements / ungrant', async () => {
    const user = await seedUser(stack.db.pool);
    const run = (...args: string[]) =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        const p = startPlatform(['admin', ...args, '--issuer', stack.idp.issuer, '--token', adminToken], {
          HOME: '/nonexistent',
        });
        void p.exited.then((code) => resolve({ code, out: p.output() }));
      });
    const g = await run('grant', '--service', 'deals', '--email', user.email);
    expect(g).toMatchObject({ code: 0 });
    expect(g.out).toContain(`granted deals to ${user.email}`);
    const l = await run('entitlements', '--email', user.email);
    expect(l.out).toMatch(/services: deals/);
    expect(l.out).toContain(admin.email);
    const u = await run('ungrant', '--service', 'deals', '--email', user.email);
    expect(u.out).toContain(`ungranted deals from ${user.email}`);
    const bad = await run('grant', '--service', 'deals');
    expect(bad.code).toBe(2);
    expect(bad.out).toContain('exactly one of --email or --role');
  });
});

describe('PLATFORM_ROLES_SQL at start-up', () => {
  it('a query the database refuses stops the IdP with one line naming the variable', async () => {
    const db = await createTestDatabase();
    const start = async (env: Record<string, string>) => {
      const p = startPlatform(['idp'], {
        IDP_PORT: '0',
        PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:9',
        PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
        PLATFORM_AUDIENCE: 'https://platform.test/api',
        DATABASE_URL: db.url,
        REDIS_URL: inject('redisUrl'),
        ...env,
      });
      const code = await p.exited;
      return { code, lines: p.output().trim().split('\n') };
    };
    try {
      const missing = await start({
        PLATFORM_ENTITLEMENTS: 'managed',
        PLATFORM_ROLES_SQL: 'SELECT role FROM no_such_table WHERE u = $1',
      });
      expect(missing.code).toBe(2);
      expect(missing.lines.at(-1)).toMatch(
        /PLATFORM_ROLES_SQL: the database refuses it: relation "no_such_table" does not exist/,
      );
      expect(missing.lines.join('\n')).not.toContain('idp listening');
      const two = await start({ PLATFORM_ROLES_SQL: 'SELECT id, email FROM users WHERE id = $1' });
      expect(two.lines.at(-1)).toMatch(
        /PLATFORM_ROLES_SQL: must return one column \(role names\), returns 2/,
      );
      const noParam = await start({ PLATFORM_ROLES_SQL: 'SELECT role FROM app_roles' });
      expect(noParam.lines).toEqual([
        'platform: configuration error: PLATFORM_ROLES_SQL: must take the user id as $1',
      ]);
      const mode = await start({ PLATFORM_ENTITLEMENTS: 'some' });
      expect(mode.lines).toEqual([
        'platform: configuration error: PLATFORM_ENTITLEMENTS: must be one of open, managed, got "some"',
      ]);
    } finally {
      await db.drop();
    }
  });
});
