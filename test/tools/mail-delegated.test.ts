// Mail as the user: with MAIL_UPSTREAM_CONNECTION naming an `entra` connection, the caller's own mail and events
// go to Microsoft Graph `/me/…` with the delegated token the gateway sends in `x-platform-upstream-token` (signed
// under identity v4), while no app-only GRAPH_* credential is configured; send-as stays app-only; Graph's 401/403
// on the delegated path is a tool error naming the connection, never a fall-back to app-only. Graph and Entra's
// token endpoint are a local stand-in over HTTP (Microsoft is out of reach); the tool server is the real one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { GraphStandIn } from './graph-stand-in.ts';
import {
  connectMcp,
  type InProcessServer,
  identityFor,
  signedHeaders,
  startInProcess,
  toolJson,
} from './helpers.ts';

const DELEGATED = 'eyJ0eXAiOiJKV1QiLCJub25jZSI6IngifQ.delegated-graph-token.sig';
const ADMIN_SCOPE = 'openid email mcp:mail mail:send_as';
const EVENT = {
  title: 'Planning',
  start: '2026-03-02T09:00:00+01:00',
  end: '2026-03-02T09:30:00+01:00',
  attendees: ['a@example.com'],
};

let db: TestDatabase;
let user: SeededUser;
let admin: SeededUser;
let graph: GraphStandIn;
/** The connection, no app-only credentials at all. */
let delegatedOnly: InProcessServer;
/** The connection and app-only credentials both. */
let both: InProcessServer;

beforeAll(async () => {
  db = await createTestDatabase();
  user = await seedUser(db.pool);
  admin = await seedUser(db.pool);
  graph = new GraphStandIn();
  await graph.start();
  graph.delegated.add(DELEGATED);
  const common = {
    DATABASE_URL: db.url,
    PLATFORM_ADMIN_EMAILS: admin.email,
    MAIL_UPSTREAM_CONNECTION: 'm365',
    GRAPH_BASE_URL: `${graph.url}/v1.0`,
  };
  delegatedOnly = await startInProcess('mail', common);
  both = await startInProcess('mail', {
    ...common,
    GRAPH_TENANT_ID: 'tenant-1',
    GRAPH_CLIENT_ID: 'graph-app',
    GRAPH_CLIENT_SECRET: 'graph-secret',
    GRAPH_TOKEN_URL: `${graph.url}/tenant-1/oauth2/v2.0/token`,
  });
});

afterAll(async () => {
  await delegatedOnly?.close();
  await both?.close();
  await graph?.close();
  await db?.drop();
});

const asUser = (over = {}) => identityFor(user, { entitlements: '', upstreamToken: DELEGATED, ...over });

async function callTool(server: InProcessServer, identity = asUser(), name = 'send_mail', args: object = {}) {
  const mcp = await connectMcp(server.mcpUrl, identity);
  try {
    return await mcp.call(
      name,
      name === 'send_mail'
        ? { to: 'x@example.com', subject: 'Hi', body: 'Hello', ...args }
        : { ...EVENT, ...args },
    );
  } finally {
    await mcp.close();
  }
}

/** The outbox rows the user's own calls left (the admin's send-as rows are the admin's). */
async function outboxCount(): Promise<number> {
  const { rows } = await db.pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM platform.mail_outbox WHERE requested_by = $1',
    [user.email],
  );
  return Number(rows[0]!.n);
}

describe('the delegated self path, with no app-only credentials', () => {
  it('send_mail goes to POST /me/sendMail with the delegated token', async () => {
    const before = graph.calls.length;
    const r = await callTool(delegatedOnly);
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    expect(toolJson(r)).toMatchObject({
      delivery: 'graph',
      status: 'sent',
      send_as: false,
      delegated: true,
      from: user.email,
    });
    const [sent] = graph.calls.slice(before);
    expect(sent).toMatchObject({ path: '/v1.0/me/sendMail', authorization: `Bearer ${DELEGATED}` });
    expect(sent!.body).toMatchObject({
      message: { subject: 'Hi', toRecipients: [{ emailAddress: { address: 'x@example.com' } }] },
    });
    expect(graph.tokenRequests).toBe(0);
    expect(await outboxCount()).toBe(0);
  });

  it('create_calendar_event goes to POST /me/events with the delegated token', async () => {
    const before = graph.calls.length;
    const r = await callTool(delegatedOnly, asUser(), 'create_calendar_event');
    expect(toolJson(r)).toMatchObject({
      delivery: 'graph',
      status: 'created',
      delegated: true,
      event_id: 'AAMkDelegated1',
    });
    expect(graph.calls.slice(before)).toMatchObject([
      { path: '/v1.0/me/events', authorization: `Bearer ${DELEGATED}` },
    ]);
  });

  it('send-as stays app-only: without app-only credentials it goes to the outbox, never to /me', async () => {
    const before = graph.calls.length;
    const r = await callTool(
      delegatedOnly,
      identityFor(admin, { scope: ADMIN_SCOPE, entitlements: '', upstreamToken: DELEGATED }),
      'send_mail',
      { as_user_email: user.email },
    );
    expect(toolJson(r)).toMatchObject({ delivery: 'outbox', status: 'queued', send_as: true });
    expect(toolJson(r).delegated).toBeUndefined();
    expect(graph.calls.length).toBe(before);
  });

  it('no delegated token reached the server: a tool error naming the connection, nothing sent', async () => {
    const before = graph.calls.length;
    const r = await callTool(delegatedOnly, identityFor(user, { entitlements: '' }));
    expect(r.isError).toBe(true);
    expect(toolJson(r).error).toMatchObject({
      code: 'connection_required',
      message: expect.stringContaining('m365'),
    });
    expect(graph.calls.length).toBe(before);
  });
});

describe('with app-only credentials configured too', () => {
  it("Graph's 401 and 403 on the delegated path are tool errors naming the connection, never a fall-back to app-only", async () => {
    for (const status of [401, 403]) {
      graph.meStatus = status;
      try {
        const before = graph.calls.length;
        const tokens = graph.tokenRequests;
        for (const tool of ['send_mail', 'create_calendar_event']) {
          const r = await callTool(both, asUser(), tool);
          expect(r.isError, tool).toBe(true);
          expect(toolJson(r).error).toMatchObject({
            code: 'connection_refused',
            message: expect.stringContaining('m365'),
          });
        }
        // Only /me was tried; no app-only token was fetched and no /users/{id} call made.
        expect(graph.calls.slice(before).map((c) => c.path)).toEqual([
          '/v1.0/me/sendMail',
          '/v1.0/me/events',
        ]);
        expect(graph.tokenRequests).toBe(tokens);
      } finally {
        graph.meStatus = 0;
      }
    }
    expect(await outboxCount()).toBe(0);
  });

  it("send-as goes app-only to /users/{id}/sendMail; the caller's own mail still goes to /me", async () => {
    const before = graph.calls.length;
    const r = await callTool(
      both,
      identityFor(admin, { scope: ADMIN_SCOPE, entitlements: '', upstreamToken: DELEGATED }),
      'send_mail',
      { as_user_email: user.email },
    );
    expect(toolJson(r)).toMatchObject({ delivery: 'graph', status: 'sent', send_as: true });
    expect((await callTool(both)).isError).toBeFalsy();
    expect(graph.calls.slice(before)).toMatchObject([
      {
        path: `/v1.0/users/${encodeURIComponent(user.email)}/sendMail`,
        authorization: 'Bearer app-only-token',
      },
      { path: '/v1.0/me/sendMail', authorization: `Bearer ${DELEGATED}` },
    ]);
  });
});

describe('identity v4 at the tool server', () => {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
  const post = (headers: Record<string, string>) =>
    fetch(delegatedOnly.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      body,
    });

  it('accepts the gateway’s v4 signature and refuses a tampered upstream token or actor (401 UNAUTHORIZED)', async () => {
    const signed = signedHeaders(asUser({ actor: 'reporting-agent' }), { url: delegatedOnly.mcpUrl, body });
    expect(signed['x-platform-identity']).toMatch(/,v4=/);
    expect((await post(signed)).status).toBe(200);
    for (const [name, value] of [
      ['x-platform-upstream-token', 'another-users-token'],
      ['x-platform-actor', 'someone-else'],
    ] as const) {
      const r = await post({ ...signed, [name]: value });
      expect(r.status, name).toBe(401);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED');
    }
  });

  it('never writes the delegated token to a log line', () => {
    const lines = JSON.stringify([delegatedOnly.logs(), both.logs()]);
    expect(lines).not.toContain(DELEGATED);
    expect(lines).not.toContain('delegated-graph-token');
  });
});
