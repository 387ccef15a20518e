// The mail server on both delivery paths: the outbox table (no Graph settings) and Microsoft Graph app-only,
// here a local stand-in over HTTP that checks what Graph checks (client credentials, bearer, paths, bodies).
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { freePort } from '../helpers/processes.ts';
import {
  connectMcp,
  type InProcessServer,
  identityFor,
  type McpConnection,
  startInProcess,
  toolJson,
} from './helpers.ts';

interface GraphCall {
  method: string;
  path: string;
  authorization: string | undefined;
  body: unknown;
}

/** Just enough of Entra's token endpoint and Graph's /users/{id}/sendMail and /events to test against. */
class GraphStandIn {
  server!: Server;
  url = '';
  tokenRequests: URLSearchParams[] = [];
  calls: GraphCall[] = [];
  valid = new Set<string>();
  nextExpiresIn = 3600;
  issued = 0;
  /** 0 for normal answers, else the status every Graph call answers (the token endpoint keeps working). */
  graphStatus = 0;

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private async handle(req: IncomingMessage, res: import('node:http').ServerResponse): Promise<void> {
    let raw = '';
    for await (const c of req) raw += c;
    const json = (status: number, body?: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body === undefined ? '' : JSON.stringify(body));
    };
    if (req.url === '/tenant-1/oauth2/v2.0/token') {
      const form = new URLSearchParams(raw);
      this.tokenRequests.push(form);
      if (form.get('client_secret') !== 'graph-secret')
        return json(401, { error: 'invalid_client', error_description: 'bad secret' });
      const token = `tok-${++this.issued}`;
      this.valid.add(token);
      return json(200, { token_type: 'Bearer', expires_in: this.nextExpiresIn, access_token: token });
    }
    const authorization = req.headers.authorization;
    this.calls.push({
      method: req.method!,
      path: req.url!,
      authorization,
      body: raw ? JSON.parse(raw) : undefined,
    });
    if (!authorization || !this.valid.has(authorization.replace(/^Bearer /, ''))) {
      return json(401, {
        error: { code: 'InvalidAuthenticationToken', message: 'Access token is empty or invalid.' },
      });
    }
    if (this.graphStatus)
      return json(this.graphStatus, { error: { code: 'ErrorAccessDenied', message: 'Access is denied.' } });
    if (req.method === 'POST' && /^\/v1\.0\/users\/[^/]+\/sendMail$/.test(req.url!)) return json(202);
    if (req.method === 'POST' && /^\/v1\.0\/users\/[^/]+\/events$/.test(req.url!))
      return json(201, { id: 'AAMkEvent1' });
    json(404, { error: { code: 'ResourceNotFound', message: 'no such route' } });
  }

  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

let db: TestDatabase;
let user: SeededUser;
let admin: SeededUser;
let graph: GraphStandIn;
let outboxServer: InProcessServer;
let graphServer: InProcessServer;

beforeAll(async () => {
  db = await createTestDatabase();
  user = await seedUser(db.pool);
  admin = await seedUser(db.pool, { email: `Admin-${Date.now()}@Example.com` });
  graph = new GraphStandIn();
  await graph.start();
  // Admin list in another case than the users row: the comparison is case-insensitive.
  const common = {
    DATABASE_URL: db.url,
    PLATFORM_ADMIN_EMAILS: ` other@example.com , ${admin.email.toUpperCase()}`,
  };
  outboxServer = await startInProcess('mail', common);
  graphServer = await startInProcess('mail', {
    ...common,
    GRAPH_TENANT_ID: 'tenant-1',
    GRAPH_CLIENT_ID: 'graph-app',
    GRAPH_CLIENT_SECRET: 'graph-secret',
    GRAPH_BASE_URL: `${graph.url}/v1.0`,
    GRAPH_TOKEN_URL: `${graph.url}/tenant-1/oauth2/v2.0/token`,
  });
});

afterAll(async () => {
  await outboxServer?.close();
  await graphServer?.close();
  await graph?.close();
  await db?.drop();
});

async function outboxRows(requestedBy: string) {
  const { rows } = await db.pool.query(
    'SELECT kind, sender_email, requested_by, send_as, payload FROM platform.mail_outbox WHERE requested_by = $1 ORDER BY created_at',
    [requestedBy],
  );
  return rows;
}

/** An admin's token that carries the send-as power (docs/tools.md § mail). */
const ADMIN_SCOPE = 'openid email mcp:mail mail:send_as';

const EVENT = {
  title: 'Closing call',
  start: '2026-03-02T09:00:00+01:00',
  end: '2026-03-02T09:30:00+01:00',
  attendees: ['a@example.com', 'b@example.com'],
};

describe('outbox delivery (no Graph settings)', () => {
  let asUser: McpConnection;
  let asAdmin: McpConnection;
  beforeAll(async () => {
    asUser = await connectMcp(outboxServer.mcpUrl, identityFor(user));
    asAdmin = await connectMcp(outboxServer.mcpUrl, identityFor(admin, { scope: ADMIN_SCOPE }));
  });
  afterAll(async () => {
    await asUser?.close();
    await asAdmin?.close();
  });
  beforeEach(async () => {
    await db.pool.query('DELETE FROM platform.mail_outbox');
  });

  it('lists send_mail and create_calendar_event with as_user_email optional', async () => {
    const { tools } = { tools: await asUser.listTools() };
    expect(tools.map((t) => t.name).sort()).toEqual(['create_calendar_event', 'send_mail']);
    for (const t of tools) expect(t.inputSchema.required).not.toContain('as_user_email');
  });

  it('send_mail queues a message from the caller', async () => {
    const r = toolJson(await asUser.call('send_mail', { to: 'x@example.com', subject: 'Hi', body: 'Hello' }));
    expect(r).toEqual({
      status: 'queued',
      delivery: 'outbox',
      from: user.email,
      send_as: false,
      outbox_id: expect.any(String),
    });
    expect(await outboxRows(user.email)).toEqual([
      {
        kind: 'mail',
        sender_email: user.email,
        requested_by: user.email,
        send_as: false,
        payload: { to: ['x@example.com'], subject: 'Hi', body: 'Hello' },
      },
    ]);
  });

  it('a non-admin naming another mailbox gets send_as_forbidden (403) for both tools, and nothing is queued', async () => {
    for (const [tool, args] of [
      ['send_mail', { to: ['x@example.com'], subject: 'Hi', body: 'Hello', as_user_email: admin.email }],
      ['create_calendar_event', { ...EVENT, as_user_email: admin.email }],
    ] as const) {
      const r = await asUser.call(tool, args);
      expect(r.isError).toBe(true);
      expect(toolJson(r)).toEqual({
        error: { code: 'send_as_forbidden', status: 403, message: expect.any(String) },
      });
    }
    expect(await outboxRows(user.email)).toEqual([]);
  });

  it('a non-admin naming their own mailbox (any case) is not send-as', async () => {
    const r = toolJson(
      await asUser.call('send_mail', {
        to: 'x@example.com',
        subject: 'S',
        body: 'B',
        as_user_email: user.email.toUpperCase(),
      }),
    );
    expect(r).toMatchObject({ from: user.email, send_as: false });
  });

  it('an admin may send mail and create events as another user', async () => {
    const mail = toolJson(
      await asAdmin.call('send_mail', {
        to: 'x@example.com',
        subject: 'S',
        body: 'B',
        as_user_email: user.email,
      }),
    );
    expect(mail).toMatchObject({ status: 'queued', from: user.email, send_as: true });
    const ev = toolJson(await asAdmin.call('create_calendar_event', { ...EVENT, as_user_email: user.email }));
    expect(ev).toMatchObject({ status: 'queued', delivery: 'outbox', organizer: user.email, send_as: true });
    const rows = await outboxRows(admin.email);
    expect(rows.map((r) => [r.kind, r.sender_email, r.send_as])).toEqual([
      ['mail', user.email, true],
      ['calendar_event', user.email, true],
    ]);
    expect(rows[1].payload).toEqual({
      title: EVENT.title,
      start: EVENT.start,
      end: EVENT.end,
      attendees: EVENT.attendees,
    });
  });

  it('refuses an event that ends before it starts, or a time without an offset', async () => {
    const backwards = await asUser.call('create_calendar_event', {
      ...EVENT,
      end: '2026-03-02T08:00:00+01:00',
    });
    expect(toolJson(backwards)).toMatchObject({ error: { code: 'invalid_arguments', status: 400 } });
    const local = await asUser.call('create_calendar_event', { ...EVENT, start: '2026-03-02T09:00:00' });
    expect(local.isError).toBe(true);
    expect(await outboxRows(user.email)).toEqual([]);
  });
});

describe('Microsoft Graph delivery (app-only)', () => {
  let asUser: McpConnection;
  let asAdmin: McpConnection;
  beforeAll(async () => {
    asUser = await connectMcp(graphServer.mcpUrl, identityFor(user));
    asAdmin = await connectMcp(graphServer.mcpUrl, identityFor(admin, { scope: ADMIN_SCOPE }));
  });
  afterAll(async () => {
    await asUser?.close();
    await asAdmin?.close();
  });
  beforeEach(() => {
    graph.calls = [];
    graph.tokenRequests = [];
    graph.graphStatus = 0;
    graph.nextExpiresIn = 3600;
  });

  it('sends mail through /users/{id}/sendMail with a client-credentials token, not into the outbox', async () => {
    graph.valid.clear();
    graph.issued = 0;
    const r = toolJson(
      await asUser.call('send_mail', {
        to: ['x@example.com', 'y@example.com'],
        subject: 'Hi',
        body: 'Hello',
      }),
    );
    expect(r).toEqual({ status: 'sent', delivery: 'graph', from: user.email, send_as: false });
    expect(graph.tokenRequests).toHaveLength(1);
    expect(Object.fromEntries(graph.tokenRequests[0]!)).toEqual({
      grant_type: 'client_credentials',
      client_id: 'graph-app',
      client_secret: 'graph-secret',
      scope: 'https://graph.microsoft.com/.default',
    });
    expect(graph.calls).toEqual([
      {
        method: 'POST',
        path: `/v1.0/users/${encodeURIComponent(user.email)}/sendMail`,
        authorization: 'Bearer tok-1',
        body: {
          message: {
            subject: 'Hi',
            body: { contentType: 'Text', content: 'Hello' },
            toRecipients: [
              { emailAddress: { address: 'x@example.com' } },
              { emailAddress: { address: 'y@example.com' } },
            ],
          },
          saveToSentItems: true,
        },
      },
    ]);
    expect(await outboxRows(user.email)).toEqual([]);
  });

  it('creates events through /users/{id}/events (UTC) and returns the event id; admins may send as another user', async () => {
    const r = toolJson(await asAdmin.call('create_calendar_event', { ...EVENT, as_user_email: user.email }));
    expect(r).toEqual({
      status: 'created',
      delivery: 'graph',
      organizer: user.email,
      send_as: true,
      event_id: 'AAMkEvent1',
    });
    expect(graph.calls.at(-1)).toMatchObject({
      path: `/v1.0/users/${encodeURIComponent(user.email)}/events`,
      body: {
        subject: 'Closing call',
        start: { dateTime: '2026-03-02T08:00:00.000', timeZone: 'UTC' },
        end: { dateTime: '2026-03-02T08:30:00.000', timeZone: 'UTC' },
        attendees: [
          { emailAddress: { address: 'a@example.com' }, type: 'required' },
          { emailAddress: { address: 'b@example.com' }, type: 'required' },
        ],
      },
    });
    const forbidden = await asUser.call('send_mail', {
      to: 'x@example.com',
      subject: 'S',
      body: 'B',
      as_user_email: admin.email,
    });
    expect(toolJson(forbidden)).toMatchObject({ error: { code: 'send_as_forbidden' } });
    expect(graph.calls).toHaveLength(1);
  });

  it('caches the token until shortly before it expires', async () => {
    graph.valid.clear(); // whatever the server has cached is stale now: exactly one new token is needed
    for (let i = 0; i < 3; i++)
      await asUser.call('send_mail', { to: 'x@example.com', subject: `S${i}`, body: 'B' });
    expect(graph.tokenRequests).toHaveLength(1);
    const accepted = graph.calls.filter((c) => graph.valid.has(c.authorization!.replace(/^Bearer /, '')));
    expect(accepted).toHaveLength(3);
    expect(new Set(accepted.map((c) => c.authorization)).size).toBe(1);

    // A token that lives no longer than the renewal margin is not reused.
    graph.valid.clear();
    graph.nextExpiresIn = 60;
    await asUser.call('send_mail', { to: 'x@example.com', subject: 'a', body: 'B' });
    await asUser.call('send_mail', { to: 'x@example.com', subject: 'b', body: 'B' });
    expect(graph.tokenRequests).toHaveLength(3);
  });

  it('on a 401 drops the cached token and retries once with a new one', async () => {
    await asUser.call('send_mail', { to: 'x@example.com', subject: 'warm', body: 'B' });
    graph.valid.clear(); // e.g. permissions granted since: the old token is refused
    graph.calls = [];
    graph.tokenRequests = [];
    const r = toolJson(await asUser.call('send_mail', { to: 'x@example.com', subject: 'S', body: 'B' }));
    expect(r.status).toBe('sent');
    expect(graph.tokenRequests).toHaveLength(1);
    expect(graph.calls.map((c) => c.authorization?.startsWith('Bearer tok-'))).toEqual([true, true]);
    expect(graph.calls[0]!.authorization).not.toBe(graph.calls[1]!.authorization);
  });

  it('Graph refusing (403) is a graph_rejected tool error with Graph’s reason', async () => {
    graph.graphStatus = 403;
    const r = await asUser.call('send_mail', { to: 'x@example.com', subject: 'S', body: 'B' });
    expect(toolJson(r)).toEqual({
      error: { code: 'graph_rejected', status: 422, message: expect.stringContaining('ErrorAccessDenied') },
    });
  });

  it('Graph down degrades to a graph_unavailable tool error, never a crash (check 20)', async () => {
    graph.graphStatus = 503;
    const down = await asUser.call('send_mail', { to: 'x@example.com', subject: 'S', body: 'B' });
    expect(toolJson(down)).toMatchObject({ error: { code: 'graph_unavailable', status: 503 } });
    expect(graphServer.logs().some((l) => l.msg === 'tool degraded' && l.code === 'graph_unavailable')).toBe(
      true,
    );
    expect((await fetch(`${graphServer.url}/health`)).status).toBe(200);
    graph.graphStatus = 0;
    expect(
      toolJson(await asUser.call('send_mail', { to: 'x@example.com', subject: 'S', body: 'B' })).status,
    ).toBe('sent');
  });
});

describe('Graph unreachable', () => {
  it('a token endpoint nobody answers is a graph_unavailable tool error', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const server = await startInProcess('mail', {
      DATABASE_URL: db.url,
      GRAPH_TENANT_ID: 'tenant-1',
      GRAPH_CLIENT_ID: 'graph-app',
      GRAPH_CLIENT_SECRET: 'graph-secret',
      GRAPH_BASE_URL: `${dead}/v1.0`,
      GRAPH_TOKEN_URL: `${dead}/token`,
    });
    const mcp = await connectMcp(server.mcpUrl, identityFor(user));
    try {
      const r = await mcp.call('create_calendar_event', EVENT);
      expect(toolJson(r)).toEqual({
        error: {
          code: 'graph_unavailable',
          status: 503,
          message: expect.stringMatching(/unreachable \(ECONNREFUSED\); nothing was sent/),
        },
      });
    } finally {
      await mcp.close();
      await server.close();
    }
  });
});
