// End to end: the real MCP SDK client, holding a platform token issued by a running `platform idp`, goes
// through a running `platform gateway` to each running `platform tool` server.
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { toolJson } from './helpers.ts';
import { type Stack, startStack } from './stack.ts';

let stack: Stack;
let user: SeededUser;
let admin: SeededUser;
let userToken: string;
let adminToken: string;

const SCOPE = 'openid email mcp:platform mcp:mail mcp:deals';

beforeAll(async () => {
  const adminEmail = `admin-${randomUUID().slice(0, 8)}@example.com`;
  stack = await startStack({ adminEmails: [adminEmail.toUpperCase()] });
  user = await seedUser(stack.db.pool);
  admin = await seedUser(stack.db.pool, { email: adminEmail });
  userToken = (await signIn(stack.idp.issuer, user.sessionToken, { scope: SCOPE })).access_token;
  // Send-as needs the power in the token: mail:send_as (or platform:admin, through platform-cli).
  adminToken = (await signIn(stack.idp.issuer, admin.sessionToken, { scope: `${SCOPE} mail:send_as` }))
    .access_token;
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

interface Session {
  client: Client;
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

async function open(
  service: string,
  token: string,
  extraHeaders: Record<string, string> = {},
): Promise<Session> {
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.baseUrl}/${service}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}`, ...extraHeaders } },
  });
  const client = new Client({ name: 'e2e', version: '1.0.0' });
  await client.connect(transport);
  return {
    client,
    call: (name, args = {}) => client.callTool({ name, arguments: args }) as Promise<CallToolResult>,
    async close() {
      await transport.terminateSession().catch(() => {});
      await client.close();
    },
  };
}

describe('platform', () => {
  it('initialize, tools/list and whoami with the caller of the platform token', async () => {
    // Identity headers sent by the client are dropped by the gateway: they cannot impersonate.
    const s = await open('platform', userToken, {
      'x-platform-user-email': admin.email,
      'x-platform-issuer': 'service',
    });
    try {
      expect(s.client.getServerVersion()).toMatchObject({ name: 'platform-platform' });
      expect((await s.client.listTools()).tools.map((t) => t.name)).toEqual(['whoami']);
      const me = toolJson(await s.call('whoami'));
      expect(me).toEqual({
        email: user.email,
        sub: user.sub,
        issuer: 'platform',
        scope: expect.any(String),
        client_id: 'platform-cli',
      });
      expect((me.scope as string).split(' ')).toEqual(
        expect.arrayContaining(['mcp:platform', 'mcp:mail', 'mcp:deals']),
      );
    } finally {
      await s.close();
    }
  });

  it('a signed-in user who is no longer provisioned gets 401 USER_NOT_PROVISIONED through the gateway', async () => {
    const gone = await seedUser(stack.db.pool);
    const token = (await signIn(stack.idp.issuer, gone.sessionToken, { scope: SCOPE })).access_token;
    await stack.db.pool.query('DELETE FROM users WHERE id = $1', [gone.id]);
    const res = await fetch(`${stack.baseUrl}/platform/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '0' } },
      }),
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: {
        code: 'USER_NOT_PROVISIONED',
        message: `user ${gone.email} is not provisioned`,
        context: { request_id: expect.any(String), reason: `user ${gone.email} is not provisioned` },
      },
    });
  });
});

describe('mail', () => {
  let asUser: Session;
  let asAdmin: Session;
  beforeAll(async () => {
    asUser = await open('mail', userToken);
    asAdmin = await open('mail', adminToken);
  });
  afterAll(async () => {
    await asUser?.close();
    await asAdmin?.close();
  });

  const event = {
    title: 'Kick-off',
    start: '2026-04-01T10:00:00Z',
    end: '2026-04-01T11:00:00Z',
    attendees: ['a@example.com'],
  };

  it('lists both tools', async () => {
    expect((await asUser.client.listTools()).tools.map((t) => t.name).sort()).toEqual([
      'create_calendar_event',
      'send_mail',
    ]);
  });

  it('send_mail and create_calendar_event as oneself', async () => {
    expect(
      toolJson(await asUser.call('send_mail', { to: 'x@example.com', subject: 'Hi', body: 'Hello' })),
    ).toMatchObject({
      status: 'queued',
      from: user.email,
      send_as: false,
    });
    expect(toolJson(await asUser.call('create_calendar_event', event))).toMatchObject({
      status: 'queued',
      organizer: user.email,
    });
    const { rows } = await stack.db.pool.query(
      'SELECT kind, sender_email FROM platform.mail_outbox WHERE requested_by = $1 ORDER BY created_at',
      [user.email],
    );
    expect(rows).toEqual([
      { kind: 'mail', sender_email: user.email },
      { kind: 'calendar_event', sender_email: user.email },
    ]);
  });

  it('non-admin send-as: send_as_forbidden on both tools', async () => {
    for (const [tool, args] of [
      ['send_mail', { to: 'x@example.com', subject: 'S', body: 'B', as_user_email: admin.email }],
      ['create_calendar_event', { ...event, as_user_email: admin.email }],
    ] as const) {
      const r = await asUser.call(tool, args);
      expect(r.isError).toBe(true);
      expect(toolJson(r)).toMatchObject({ error: { code: 'send_as_forbidden', status: 403 } });
    }
  });

  it('admin send-as goes out from the named mailbox', async () => {
    expect(
      toolJson(
        await asAdmin.call('send_mail', {
          to: 'x@example.com',
          subject: 'S',
          body: 'B',
          as_user_email: user.email,
        }),
      ),
    ).toMatchObject({
      from: user.email,
      send_as: true,
    });
    expect(
      toolJson(await asAdmin.call('create_calendar_event', { ...event, as_user_email: user.email })),
    ).toMatchObject({
      organizer: user.email,
      send_as: true,
    });
    const { rows } = await stack.db.pool.query(
      'SELECT sender_email, send_as FROM platform.mail_outbox WHERE requested_by = $1',
      [admin.email],
    );
    expect(rows).toEqual([
      { sender_email: user.email, send_as: true },
      { sender_email: user.email, send_as: true },
    ]);
  });
});

describe('deals (checks 17–21)', () => {
  let s: Session;
  beforeAll(async () => {
    s = await open('deals', userToken);
  });
  afterAll(async () => {
    await s?.close();
  });

  const dealCount = async (table: string, dealId: string) =>
    (
      await stack.db.pool.query(`SELECT count(*)::int AS n FROM platform.${table} WHERE deal_id = $1`, [
        dealId,
      ])
    ).rows[0].n as number;

  it('lists the three tools', async () => {
    expect((await s.client.listTools()).tools.map((t) => t.name).sort()).toEqual([
      'citation_status',
      'get_conflicts',
      'propose_deal_closure',
    ]);
  });

  it('17: two identical calls, one ledger row; same key with another payload is IdempotencyConflict', async () => {
    const args = {
      deal_id: `deal-${randomUUID()}`,
      metrics: [{ name: 'revenue', value: 10, source_file: 'a.pdf', location: 'p. 1' }],
      citations: [],
      idempotency_key: randomUUID(),
    };
    const first = toolJson(await s.call('propose_deal_closure', args));
    const second = toolJson(await s.call('propose_deal_closure', args));
    expect(first.was_inserted).toBe(true);
    expect(second).toMatchObject({ artifact_id: first.artifact_id, was_inserted: false });
    expect(await dealCount('deal_artifacts', args.deal_id)).toBe(1);
    const clash = await s.call('propose_deal_closure', { ...args, skill: 'other' });
    expect(toolJson(clash)).toMatchObject({ error: { code: 'IdempotencyConflict', status: 409 } });
    expect(await dealCount('deal_artifacts', args.deal_id)).toBe(1);
  });

  it('18 and 19: fragile citations counted and shown; a >10 % gap recorded (op propose) and in the conflict view', async () => {
    const dealId = `deal-${randomUUID()}`;
    const out = toolJson(
      await s.call('propose_deal_closure', {
        deal_id: dealId,
        metrics: [
          { name: 'ebitda', value: 200, source_file: 'cim.pdf', location: 'p. 9' },
          { name: 'ebitda', value: 250, source_file: 'model.xlsx', location: 'C9' },
        ],
        citations: [
          {
            anchor_type: 'content_hash',
            anchor: 'sha256:1',
            source_file: 'cim.pdf',
            metric: 'ebitda',
            value: 200,
          },
          { anchor_type: 'page', anchor: '9', source_file: 'cim.pdf' },
        ],
        idempotency_key: randomUUID(),
        skill: 'deal-review',
      }),
    );
    expect(out.conflicts).toEqual([{ metric: 'ebitda', relative_gap: 0.2 }]);
    const view = toolJson(await s.call('get_conflicts', { deal_id: dealId }));
    expect(view.conflicts).toEqual([
      expect.objectContaining({
        min: 200,
        max: 250,
        relative_gap: 0.2,
        values: [
          { value: 200, source_file: 'cim.pdf', location: 'p. 9' },
          { value: 250, source_file: 'model.xlsx', location: 'C9' },
        ],
      }),
    ]);
    const ev = await stack.db.pool.query(
      'SELECT op, detail FROM platform.artifact_event WHERE artifact_id = $1',
      [out.artifact_id],
    );
    expect(ev.rows).toEqual([
      {
        op: 'propose',
        detail: expect.objectContaining({ conflicts: [expect.objectContaining({ metric: 'ebitda' })] }),
      },
    ]);
    const board = toolJson(await s.call('citation_status', { deal_id: dealId }));
    expect(board).toMatchObject({
      total: 2,
      durable: 1,
      fragile: 1,
      round_trip: { checked: 1, reproduced: 1, durable_reproduced_rate: 1 },
    });
    expect(board.fragile_citations).toEqual([
      { artifact_id: out.artifact_id, anchor_type: 'page', anchor: '9', source_file: 'cim.pdf' },
    ]);
  });

  it('21: an artifact written under schema_version 1 still reads', async () => {
    const dealId = `deal-${randomUUID()}`;
    await stack.db.pool.query(
      `INSERT INTO platform.deal_artifacts (artifact_id, deal_id, schema_version, body, created_by) VALUES ($1, $2, 1, $3, 'old@example.com')`,
      [
        randomUUID(),
        dealId,
        JSON.stringify({
          metrics: [{ name: 'arr', value: 1, source_file: 'x', location: 'y' }],
          citations: ['old quote'],
        }),
      ],
    );
    expect(toolJson(await s.call('citation_status', { deal_id: dealId }))).toMatchObject({
      artifacts: 1,
      total: 1,
      fragile: 1,
      unreadable_artifacts: [],
    });
  });

  it('20: the database down degrades to a tool error through the gateway (no 502), then recovers', async () => {
    await stack.dealsDb.down();
    try {
      const r = await s.call('get_conflicts', { deal_id: 'any' });
      expect(r.isError).toBe(true);
      expect(toolJson(r)).toMatchObject({ error: { code: 'database_unavailable', status: 503 } });
      expect((await fetch(`${stack.baseUrl}/deals/health`)).status).toBe(200);
    } finally {
      await stack.dealsDb.up();
    }
    expect((await s.call('get_conflicts', { deal_id: 'any' })).isError).toBeFalsy();
    expect(stack.tools.deals.child.exitCode).toBeNull();
  });
});
