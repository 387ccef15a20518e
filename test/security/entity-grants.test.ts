// Entity grants end to end (the IdP, the gateway and the deals server as real processes): the token's `ent`,
// forwarded under identity signature v3, decides the deals tools when PLATFORM_ENTITY_ENFORCEMENT=on; an entity
// ungrant cuts the live token; more grants than PLATFORM_ENT_MAX give `ent_overflow`, refused by enforcement; a
// tampered v3 header is refused; v2 still reaches a tool server (whose entitlements header it then ignores).
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeEntitlements } from '../../lib/identity.ts';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { freePort, type RunningProcess, startPlatform } from '../helpers/processes.ts';
import { connectMcp, identityFor, signedHeaders, toolJson, toolKey } from '../tools/helpers.ts';
import { type Stack, startStack } from '../tools/stack.ts';

const SCOPE = 'openid email mcp:deals';
const ENT_MAX = 3;
let stack: Stack;
let admin: SeededUser;
let adminToken: string;
/** A second deals server on the same database, enforcement unset (today's behaviour). */
let dealsOff: { p: RunningProcess; url: string };

beforeAll(async () => {
  const adminEmail = `admin-${randomUUID().slice(0, 8)}@example.com`;
  stack = await startStack({
    adminEmails: [adminEmail],
    idpEnv: { PLATFORM_ENT_MAX: String(ENT_MAX) },
    toolEnv: { deals: { PLATFORM_ENTITY_ENFORCEMENT: 'on' } },
  });
  admin = await seedUser(stack.db.pool, { email: adminEmail });
  adminToken = (await signIn(stack.idp.issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
  const port = await freePort();
  const p = startPlatform(['tool', 'deals'], {
    DATABASE_URL: stack.db.url,
    TOOL_IDENTITY_KEY: toolKey('deals'),
    DEALS_MCP_PORT: String(port),
  });
  await p.waitFor(/deals tool server listening/, 60_000);
  dealsOff = { p, url: `http://127.0.0.1:${port}` };
}, 120_000);

afterAll(async () => {
  await dealsOff?.p.stop();
  await stack?.stop();
});

async function adminApi(method: 'POST' | 'DELETE', query: string, body?: unknown) {
  const res = await fetch(`${stack.idp.issuer}/admin/api/entitlements${query}`, {
    method,
    headers: {
      authorization: `Bearer ${adminToken}`,
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  expect(res.status).toBe(200);
  return res.json() as Promise<Record<string, unknown>>;
}

const grant = (entity: string, permission: string, email: string) =>
  adminApi('POST', '', { entity, permission, email });

/** A tool call through the gateway with the MCP SDK client, holding `token`. */
async function callViaGateway(
  token: string,
  name: string,
  args: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<CallToolResult> {
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.baseUrl}/deals/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}`, ...headers } },
  });
  const client = new Client({ name: 'entity-grants', version: '1.0.0' });
  await client.connect(transport);
  try {
    return (await client.callTool({ name, arguments: args })) as CallToolResult;
  } finally {
    await client.close();
  }
}

const proposal = (dealId: string) => ({
  deal_id: dealId,
  metrics: [{ name: 'revenue', value: 100, source_file: 'a.xlsx', location: 'B2' }],
  citations: ['quoted text'],
  idempotency_key: randomUUID(),
});

const codeOf = (r: Parameters<typeof toolJson>[0]) =>
  (toolJson(r).error as { code?: string } | undefined)?.code;

async function userWith(grants: Array<[string, string]>) {
  const u = await seedUser(stack.db.pool);
  for (const [entity, permission] of grants) await grant(entity, permission, u.email);
  const t = await signIn(stack.idp.issuer, u.sessionToken, { scope: SCOPE });
  return { u, t };
}

describe('entity grants at the deals server (PLATFORM_ENTITY_ENFORCEMENT=on)', () => {
  it('write on deal:<id> lets propose_deal_closure succeed; read alone is entity_forbidden but reads', async () => {
    const writer = await userWith([['deal:w1', 'write']]);
    expect(decodeJwt(writer.t.access_token).ent).toEqual({ 'deal:w1': ['write'] });
    const ok = await callViaGateway(writer.t.access_token, 'propose_deal_closure', proposal('w1'));
    expect(ok.isError).toBeFalsy();
    expect(toolJson(ok).was_inserted).toBe(true);

    const reader = await userWith([['deal:w1', 'read']]);
    const refused = await callViaGateway(reader.t.access_token, 'propose_deal_closure', proposal('w1'));
    expect(refused.isError).toBe(true);
    expect(toolJson(refused)).toMatchObject({ error: { code: 'entity_forbidden', status: 403 } });
    for (const tool of ['get_conflicts', 'citation_status']) {
      const read = await callViaGateway(reader.t.access_token, tool, { deal_id: 'w1' });
      expect(read.isError, tool).toBeFalsy();
      // Write implies read.
      expect(
        (await callViaGateway(writer.t.access_token, tool, { deal_id: 'w1' })).isError,
        tool,
      ).toBeFalsy();
      // Another deal: nothing granted.
      expect(codeOf(await callViaGateway(reader.t.access_token, tool, { deal_id: 'w2' })), tool).toBe(
        'entity_forbidden',
      );
    }
  });

  it('an x-platform-entitlements header sent by the client is dropped by the gateway', async () => {
    const reader = await userWith([['deal:c1', 'read']]);
    const forged = encodeEntitlements({ 'deal:c1': ['read', 'write'] });
    const r = await callViaGateway(reader.t.access_token, 'propose_deal_closure', proposal('c1'), {
      'x-platform-entitlements': forged,
    });
    expect(codeOf(r)).toBe('entity_forbidden');
  });

  it('an entity ungrant refuses the live token within 1 s and the refreshed token lacks the entity', async () => {
    const { u, t } = await userWith([
      ['deal:u1', 'write'],
      ['deal:u2', 'read'],
    ]);
    const probe = () =>
      fetch(`${stack.baseUrl}/deals/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${t.access_token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      }).then((r) => r.status);
    expect(await probe()).not.toBe(401);
    const q = new URLSearchParams({ entity: 'deal:u1', email: u.email });
    const answer = await adminApi('DELETE', `?${q}`);
    expect(answer).toMatchObject({ entity: 'deal:u1', removed: true, subjects: [u.sub] });
    const deadline = Date.now() + 1000;
    let status = await probe();
    while (status !== 401 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      status = await probe();
    }
    expect(status).toBe(401);
    // Every refreshed token lacks the entity; one issued in the cut-off's second is refused like the live one
    // (iat <= cut-off), so the client refreshes until it holds one issued after it.
    let latest = t.refresh_token;
    let fresh = '';
    do {
      const r = await refresh(stack.idp.issuer, latest);
      expect(r.status).toBe(200);
      fresh = r.json.access_token as string;
      latest = r.json.refresh_token as string;
      expect(decodeJwt(fresh).ent).toEqual({ 'deal:u2': ['read'] });
    } while (decodeJwt(fresh).iat! <= Number(answer.cutoff));
    expect(codeOf(await callViaGateway(fresh, 'propose_deal_closure', proposal('u1')))).toBe(
      'entity_forbidden',
    );
    expect((await callViaGateway(fresh, 'get_conflicts', { deal_id: 'u2' })).isError).toBeFalsy();
  });

  it(`more than PLATFORM_ENT_MAX (${ENT_MAX}) entities: no ent, ent_overflow, and every entity refused`, async () => {
    const within = await userWith([
      ['deal:o1', 'write'],
      ['deal:o2', 'read'],
      ['deal:o3', 'read'],
    ]);
    expect(Object.keys(decodeJwt(within.t.access_token).ent as object)).toHaveLength(ENT_MAX);
    const over = await userWith([
      ['deal:o1', 'write'],
      ['deal:o2', 'read'],
      ['deal:o3', 'read'],
      ['deal:o4', 'read'],
    ]);
    const claims = decodeJwt(over.t.access_token);
    expect(claims.ent).toBeUndefined();
    expect(claims.ent_overflow).toBe(true);
    const r = await callViaGateway(over.t.access_token, 'propose_deal_closure', proposal('o1'));
    expect(toolJson(r)).toMatchObject({ error: { code: 'entity_forbidden' } });
    expect(JSON.stringify(toolJson(r))).toContain('PLATFORM_ENT_MAX');
  });
});

describe('enforcement unset, and identity signatures v3 and v2 at a tool server', () => {
  const user = { email: `off-${randomUUID().slice(0, 8)}@example.com`, sub: randomUUID() };
  beforeAll(async () => {
    await seedUser(stack.db.pool, { email: user.email });
  });

  it('unset: propose_deal_closure succeeds whatever ent says (v3 with read on another deal)', async () => {
    const entitlements = encodeEntitlements({ 'deal:elsewhere': ['read'] });
    const c = await connectMcp(`${dealsOff.url}/deals/mcp`, identityFor(user, { entitlements }));
    try {
      const r = await c.call('propose_deal_closure', proposal('off1'));
      expect(r.isError).toBeFalsy();
    } finally {
      await c.close();
    }
  });

  it('v2 (a gateway not yet upgraded) is still accepted', async () => {
    const c = await connectMcp(`${dealsOff.url}/deals/mcp`, identityFor(user));
    try {
      expect((await c.call('get_conflicts', { deal_id: 'off1' })).isError).toBeFalsy();
    } finally {
      await c.close();
    }
  });

  it('v3 with a tampered x-platform-entitlements is refused 401 UNAUTHORIZED', async () => {
    const url = `${dealsOff.url}/deals/mcp`;
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const entitlements = encodeEntitlements({ 'deal:t1': ['read'] });
    const headers = signedHeaders(identityFor(user, { entitlements }), { url, method: 'POST', body });
    const send = (h: Record<string, string>) =>
      fetch(url, {
        method: 'POST',
        headers: { ...h, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body,
      });
    expect((await send(headers)).status).toBe(200);
    const tampered = await send({
      ...headers,
      'x-platform-entitlements': encodeEntitlements({ 'deal:t1': ['read', 'write'] }),
    });
    expect(tampered.status).toBe(401);
    expect(await tampered.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
    const { 'x-platform-entitlements': _, ...stripped } = headers;
    expect((await send(stripped)).status).toBe(401);
  });

  it('DEALS_ENTITY_SQL maps a deal to its entity (enforcement on; no row: deal:<deal_id>)', async () => {
    await stack.db.pool.query(
      `CREATE TABLE public.deal_accounts_q1 (deal_id text PRIMARY KEY, account text NOT NULL);
       INSERT INTO public.deal_accounts_q1 VALUES ('m1', 'account:acme')`,
    );
    const port = await freePort();
    const p = startPlatform(['tool', 'deals'], {
      DATABASE_URL: stack.db.url,
      TOOL_IDENTITY_KEY: toolKey('deals'),
      DEALS_MCP_PORT: String(port),
      PLATFORM_ENTITY_ENFORCEMENT: 'on',
      DEALS_ENTITY_SQL: 'SELECT account FROM public.deal_accounts_q1 WHERE deal_id = $1',
    });
    try {
      await p.waitFor(/deals tool server listening/, 60_000);
      const call = async (ent: Record<string, string[]>, dealId: string) => {
        const id = identityFor(user, { entitlements: encodeEntitlements(ent) });
        const c = await connectMcp(`http://127.0.0.1:${port}/deals/mcp`, id);
        try {
          return await c.call('propose_deal_closure', proposal(dealId));
        } finally {
          await c.close();
        }
      };
      expect((await call({ 'account:acme': ['write'] }, 'm1')).isError).toBeFalsy();
      expect(codeOf(await call({ 'deal:m1': ['write'] }, 'm1'))).toBe('entity_forbidden');
      // Not in the table: the deal's own entity.
      expect((await call({ 'deal:m2': ['write'] }, 'm2')).isError).toBeFalsy();
    } finally {
      await p.stop();
    }
  });

  it('a DEALS_ENTITY_SQL the database refuses stops the start-up with its name', async () => {
    const p = startPlatform(['tool', 'deals'], {
      DATABASE_URL: stack.db.url,
      TOOL_IDENTITY_KEY: toolKey('deals'),
      DEALS_MCP_PORT: String(await freePort()),
      DEALS_ENTITY_SQL: 'SELECT account FROM no_such_table WHERE deal_id = $1',
    });
    expect(await p.exited).not.toBe(0);
    expect(p.output()).toContain('DEALS_ENTITY_SQL');
  });
});
