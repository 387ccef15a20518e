// Services with an upstream connection, through a real `platform gateway` process: the caller's platform token is
// exchanged (RFC 8693) at a stand-in of the IdP's token endpoint that answers as docs/gateway.md says the IdP
// does, and the user's upstream token is sent to a real MCP SDK v2 server (a third-party "remote" upstream that
// accepts only its own tokens and records every request) or, signed under identity v4, to a tool server stand-in.
// The platform token must never reach an upstream; two users' tokens must never be mixed; a revocation of the
// user drops the cached token within 1 s; a user who has not connected gets −32042 with the connect URL.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client,
  StreamableHTTPClientTransport,
  UrlElicitationRequiredError,
} from '@modelcontextprotocol/client';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisRevocationPublisher } from '../../lib/revocation.ts';
import {
  call,
  errorOf,
  forgetSharedKeySets,
  type GatewayProcess,
  gatewayEnv,
  type KeyServer,
  mailServiceToken,
  platformToken,
  startGatewayProcess,
  startKeyServer,
  startUpstream,
  type Upstream,
  verifyRecorded,
} from './helpers.ts';
import {
  GATEWAY_CLIENT_SECRET,
  type RemoteMcpServer,
  startRemoteMcpServer,
  startTokenEndpoint,
  type TokenEndpoint,
  uniqueSub,
} from './upstream-helpers.ts';

const GITHUB_SECRET = 'upstream-auth-test-github-own-secret-0123456789abcdef';
const CONNECT_BASE = 'https://idp.example.test';

let redis: Redis;
let ks: KeyServer;
let idp: TokenEndpoint;
let remote: RemoteMcpServer;
let tool: Upstream;
let gw: GatewayProcess;

beforeAll(async () => {
  redis = new Redis(inject('redisUrl'));
  [ks, remote, tool] = await Promise.all([startKeyServer(), startRemoteMcpServer(), startUpstream()]);
  idp = await startTokenEndpoint(ks, CONNECT_BASE);
  await forgetSharedKeySets(inject('redisUrl'), ks.issuer);
  gw = await startGatewayProcess(
    gatewayEnv(
      { services: { github: remote.mcpUrl, mail: tool.url }, platform: ks, redisUrl: inject('redisUrl') },
      {
        GITHUB_UPSTREAM_CONNECTION: 'github',
        GITHUB_UPSTREAM_KIND: 'remote',
        GITHUB_MCP_SHARED_SECRET: GITHUB_SECRET,
        MAIL_UPSTREAM_CONNECTION: 'm365',
        GATEWAY_CLIENT_SECRET,
        GATEWAY_TOKEN_URL: `${idp.url}/oauth/token`,
        // Every line the gateway can write: no token may appear in any of them.
        LOG_LEVEL: 'trace',
      },
    ),
  );
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  await Promise.all([ks?.close(), idp?.close(), remote?.close(), tool?.close()]);
  await redis?.quit();
});

interface User {
  sub: string;
  email: string;
  token: string;
}

async function newUser(label: string, claims: Record<string, unknown> = {}, iat = 0): Promise<User> {
  const sub = uniqueSub(label);
  const email = `${label}-${randomUUID().slice(0, 8)}@example.com`;
  const token = await platformToken(ks, { sub, email, scope: 'mcp:github mcp:mail', ...claims }, { iat });
  return { sub, email, token };
}

/** A fresh platform token for the same user (signing in again), issued `iat` seconds from now. */
const again = (u: User, iat = 0) =>
  platformToken(ks, { sub: u.sub, email: u.email, scope: 'mcp:github mcp:mail' }, { iat });

/** The user connects github at the IdP; the remote server accepts the upstream token issued to them. */
function connectGithub(u: User): string {
  const up = idp.connect(u.sub, 'github');
  remote.accept(up, u.email);
  return up;
}

async function sdkClient(token: string): Promise<Client> {
  const client = new Client({ name: 'upstream-auth-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gw.url}/github/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** One MCP 2026-07-28 tools/call of the remote's tool, as a raw POST (no handshake needed). */
function whoamiCall(token: string, id: number | string = 1) {
  return call(`${gw.url}/github/mcp`, {
    method: 'POST',
    token,
    headers: {
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'upstream_whoami',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: {
        name: 'upstream_whoami',
        arguments: {},
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
}

/** The user the remote server resolved the bearer to, from a whoamiCall answer. */
function whoamiUser(r: { status: number; json: Record<string, unknown>; text: string }): string {
  expect(r.status, r.text).toBe(200);
  const result = r.json.result as { structuredContent?: { user?: string } } | undefined;
  return String(result?.structuredContent?.user);
}

const exchangesOf = (sub: string) => idp.exchanges.filter((e) => e.sub === sub);

describe('a remote MCP server behind the one sign-in', () => {
  it("the SDK v2 client reaches the remote tool with the user's upstream token, and the remote sees nothing of ours", async () => {
    const u = await newUser('remote');
    const up = connectGithub(u);
    const before = remote.requests.length;
    const client = await sdkClient(u.token);
    const result = await client.callTool({ name: 'upstream_whoami', arguments: {} });
    await client.close();
    expect(result.structuredContent).toEqual({ user: u.email });
    const seen = remote.requests.slice(before);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (const r of seen) {
      expect(r.headers.authorization).toBe(`Bearer ${up}`);
      // Its own Host, not the gateway's; no x-platform-* header at all.
      expect(r.headers.host).toBe(remote.host);
      expect(Object.keys(r.headers).filter((h) => h.startsWith('x-platform-'))).toEqual([]);
      expect(r.url).toBe('/mcp');
    }
    // One exchange for the whole session (cached), made with the caller's platform token as the subject token.
    expect(exchangesOf(u.sub)).toHaveLength(1);
    expect(exchangesOf(u.sub)[0]).toMatchObject({ connection: 'github', subjectToken: u.token, answer: up });
  });

  it('the body reaches the remote unchanged', async () => {
    const u = await newUser('body');
    connectGithub(u);
    const before = remote.requests.length;
    const r = await whoamiCall(u.token, 'id-"quoted"');
    expect(whoamiUser(r)).toBe(u.email);
    const sent = remote.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(JSON.parse(sent[0]!.body).id).toBe('id-"quoted"');
    expect(sent[0]!.headers['mcp-name']).toBe('upstream_whoami');
  });

  it("its protected-resource metadata is the gateway's own", async () => {
    const r = await call(`${gw.url}/github/.well-known/oauth-protected-resource`);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      resource: 'https://mcp.example.test/github/mcp',
      authorization_servers: [ks.issuer],
      scopes_supported: ['mcp:github'],
    });
  });

  it('only /<service>/mcp reaches a remote upstream given with a path', async () => {
    const u = await newUser('paths');
    connectGithub(u);
    const before = remote.requests.length;
    const r = await call(`${gw.url}/github/other`, { method: 'POST', token: u.token });
    expect(r.status).toBe(404);
    expect(errorOf(r).code).toBe('NOT_FOUND');
    expect(remote.requests.length).toBe(before);
  });

  it('an Entra or service token for such a service: 403 CONNECTION_UNAVAILABLE, nothing exchanged or sent', async () => {
    const token = await mailServiceToken(GITHUB_SECRET, 'https://mcp.example.test/github/mcp', {
      iss: 'github',
      email: 'svc@example.com',
      scope: 'mcp:github',
    });
    const [remoteBefore, idpBefore] = [remote.requests.length, idp.raw.length];
    const r = await whoamiCall(token);
    expect(r.status).toBe(403);
    expect(errorOf(r)).toMatchObject({ code: 'CONNECTION_UNAVAILABLE', reason: 'token_not_exchangeable' });
    expect(remote.requests.length).toBe(remoteBefore);
    expect(idp.raw.length).toBe(idpBefore);
  });
});

describe('a user who has not connected', () => {
  it('gets −32042 with the connect URL through the SDK v2 client; the upstream is not contacted; connecting fixes it', async () => {
    const u = await newUser('unconnected');
    const before = remote.requests.length;
    const err = await sdkClient(u.token).then(
      (c) => c.callTool({ name: 'upstream_whoami', arguments: {} }),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(UrlElicitationRequiredError);
    const elicitations = (err as UrlElicitationRequiredError).elicitations;
    expect(elicitations).toHaveLength(1);
    expect(elicitations[0]).toMatchObject({
      mode: 'url',
      url: `${CONNECT_BASE}/connections/github`,
      elicitationId: expect.any(String),
      message: expect.any(String),
    });
    expect(remote.requests.length).toBe(before);

    connectGithub(u);
    const client = await sdkClient(u.token);
    expect((await client.callTool({ name: 'upstream_whoami', arguments: {} })).structuredContent).toEqual({
      user: u.email,
    });
    await client.close();
  });

  it('every MCP request gets HTTP 200 −32042 whatever its revision (batch included); anything else 403 CONNECTION_REQUIRED', async () => {
    const u = await newUser('unconnected-raw');
    const before = remote.requests.length;
    const modern = await whoamiCall(u.token, 7);
    expect(modern.status).toBe(200);
    expect(modern.json).toMatchObject({
      jsonrpc: '2.0',
      id: 7,
      error: {
        code: -32042,
        data: { elicitations: [{ mode: 'url', url: `${CONNECT_BASE}/connections/github` }] },
      },
    });
    const batch = await call(`${gw.url}/github/mcp`, {
      method: 'POST',
      token: u.token,
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 'b', method: 'tools/list' },
      ]),
    });
    expect(batch.status).toBe(200);
    expect(
      (batch.json as unknown as Array<{ id: unknown; error: { code: number } }>).map((m) => [
        m.id,
        m.error.code,
      ]),
    ).toEqual([
      [1, -32042],
      ['b', -32042],
    ]);
    const get = await call(`${gw.url}/github/mcp`, {
      token: u.token,
      headers: { accept: 'text/event-stream' },
    });
    expect(get.status).toBe(403);
    expect(errorOf(get)).toMatchObject({ code: 'CONNECTION_REQUIRED', reason: 'connection_required' });
    expect(get.json.error.context.connect_uri).toBe(`${CONNECT_BASE}/connections/github`);
    expect(remote.requests.length).toBe(before);
  });
});

describe('the cache of upstream tokens', () => {
  it("two users' tokens are never mixed under 50 concurrent calls, and each user costs one exchange", async () => {
    const [a, b] = await Promise.all([newUser('mix-a'), newUser('mix-b')]);
    connectGithub(a);
    connectGithub(b);
    // Both users' first calls arrive together and wait on their exchanges together.
    idp.delayMs = 200;
    try {
      const callers = Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? a : b));
      const answers = await Promise.all(callers.map((u, i) => whoamiCall(u.token, i)));
      for (const [i, r] of answers.entries()) expect(whoamiUser(r), `call ${i}`).toBe(callers[i]!.email);
    } finally {
      idp.delayMs = 0;
    }
    expect(exchangesOf(a.sub)).toHaveLength(1);
    expect(exchangesOf(b.sub)).toHaveLength(1);
  });

  for (const how of ['revoke-user (subject cut-off)', 'block (email cut-off)'] as const) {
    it(`is dropped within 1 s of ${how}: the next call exchanges afresh`, async () => {
      const u = await newUser(how.startsWith('block') ? 'blocked' : 'revoked', {}, -5);
      const first = connectGithub(u);
      expect(whoamiUser(await whoamiCall(u.token))).toBe(u.email);
      expect(exchangesOf(u.sub)).toHaveLength(1);
      // The IdP now holds another grant for the user: only a fresh exchange can see it.
      const second = connectGithub(u);
      expect(second).not.toBe(first);
      const publisher = new RedisRevocationPublisher(redis);
      const cutoff = Math.floor(Date.now() / 1000);
      const start = performance.now();
      if (how.startsWith('block')) await publisher.denyEmail(u.email, cutoff);
      else await publisher.denySubject(u.sub, cutoff);
      // The user signs in again after the cut-off; the old token is refused, the new one must not get the
      // upstream token cached before the revocation.
      const fresh = await again(u, 2);
      let elapsed = Number.POSITIVE_INFINITY;
      for (;;) {
        const r = await whoamiCall(fresh);
        if (r.status === 200 && exchangesOf(u.sub).length === 2) {
          elapsed = performance.now() - start;
          break;
        }
        if (performance.now() - start > 3000) break;
      }
      expect(elapsed).toBeLessThan(1000);
      expect(exchangesOf(u.sub)[1]).toMatchObject({ subjectToken: fresh, answer: second });
      expect((await whoamiCall(u.token)).status).toBe(401);
    });
  }
});

describe('an upstream that refuses the token', () => {
  it('answers 401: the client gets 502 UPSTREAM_AUTH_FAILED, the request is not retried, the next one exchanges afresh', async () => {
    const u = await newUser('refused');
    const first = connectGithub(u);
    expect(whoamiUser(await whoamiCall(u.token))).toBe(u.email);
    // The upstream withdraws the token (expired there, revoked there); the IdP holds a refreshed grant.
    remote.withdraw(first);
    const second = connectGithub(u);
    const before = remote.requests.length;
    const r = await whoamiCall(u.token);
    expect(r.status).toBe(502);
    expect(errorOf(r)).toMatchObject({ code: 'UPSTREAM_AUTH_FAILED', reason: 'upstream_unauthorized' });
    expect(remote.requests.slice(before).map((q) => q.headers.authorization)).toEqual([`Bearer ${first}`]);
    expect(whoamiUser(await whoamiCall(u.token))).toBe(u.email);
    expect(exchangesOf(u.sub).map((e) => e.answer)).toEqual([first, second]);
    expect(remote.requests.at(-1)!.headers.authorization).toBe(`Bearer ${second}`);
  });
});

describe('a tool server with an upstream connection', () => {
  it('gets the upstream token in x-platform-upstream-token under signature v4, and no Authorization', async () => {
    const u = await newUser('tool');
    const up = idp.connect(u.sub, 'm365');
    const before = tool.requests.length;
    const r = await call(`${gw.url}/mail/mcp`, { method: 'POST', token: u.token });
    expect(r.status, r.text).toBe(200);
    const seen = tool.requests.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers['x-platform-identity']).toMatch(/^t=\d+,v4=[0-9a-f]{64}$/);
    expect(seen[0]!.headers.authorization).toBeUndefined();
    const id = verifyRecorded(seen[0]!);
    expect(id).toMatchObject({ email: u.email, sub: u.sub, upstreamToken: up, actor: '' });
    expect(exchangesOf(u.sub)[0]).toMatchObject({ connection: 'm365' });
  });

  it("a delegated token: its actor in x-platform-actor (v4), its own cached token apart from the user's", async () => {
    const u = await newUser('delegating');
    const up = idp.connect(u.sub, 'm365');
    const delegated = await platformToken(ks, {
      sub: u.sub,
      email: u.email,
      scope: 'mcp:mail',
      client_id: 'reporting-agent',
      act: { sub: 'reporting-agent', act: { sub: 'first-hop' } },
    });
    const before = tool.requests.length;
    expect((await call(`${gw.url}/mail/mcp`, { method: 'POST', token: delegated })).status).toBe(200);
    expect((await call(`${gw.url}/mail/mcp`, { method: 'POST', token: u.token })).status).toBe(200);
    const [asAgent, asUser] = tool.requests.slice(before).map((r) => verifyRecorded(r));
    expect(asAgent).toMatchObject({
      actor: 'reporting-agent',
      upstreamToken: up,
      clientId: 'reporting-agent',
    });
    expect(asUser).toMatchObject({ actor: '', upstreamToken: up });
    // The agent's chain and the user's own client are two cache entries: two exchanges.
    expect(exchangesOf(u.sub).map((e) => e.subjectToken)).toEqual([delegated, u.token]);
  });

  it('not connected, a non-MCP request: 403 CONNECTION_REQUIRED with the connect URI; the tool server is not contacted', async () => {
    const u = await newUser('tool-unconnected');
    const before = tool.requests.length;
    const r = await call(`${gw.url}/mail/mcp`, { token: u.token });
    expect(r.status).toBe(403);
    expect(errorOf(r).code).toBe('CONNECTION_REQUIRED');
    expect(r.json.error.context).toMatchObject({
      connection: 'm365',
      connect_uri: `${CONNECT_BASE}/connections/m365`,
    });
    expect(tool.requests.length).toBe(before);
  });
});

describe('the IdP failing the gateway', () => {
  it('a refused client secret or an unreachable token endpoint: 503 EXCHANGE_UNAVAILABLE, nothing sent upstream', async () => {
    const u = await newUser('idp-failing');
    connectGithub(u);
    const cases = [
      { secret: `${GATEWAY_CLIENT_SECRET}-wrong`, url: `${idp.url}/oauth/token`, reason: 'exchange_refused' },
      {
        secret: GATEWAY_CLIENT_SECRET,
        url: 'http://127.0.0.1:9/oauth/token',
        reason: 'exchange_unreachable',
      },
    ];
    for (const c of cases) {
      const other = await startGatewayProcess(
        gatewayEnv(
          { services: { github: remote.mcpUrl }, platform: ks, redisUrl: inject('redisUrl') },
          {
            GITHUB_UPSTREAM_CONNECTION: 'github',
            GITHUB_UPSTREAM_KIND: 'remote',
            GATEWAY_CLIENT_SECRET: c.secret,
            GATEWAY_TOKEN_URL: c.url,
          },
        ),
      );
      try {
        const before = remote.requests.length;
        const r = await call(`${other.url}/github/mcp`, { method: 'POST', token: u.token });
        expect(r.status, c.reason).toBe(503);
        expect(errorOf(r)).toMatchObject({ code: 'EXCHANGE_UNAVAILABLE', reason: c.reason });
        expect(r.headers['retry-after']).toBe('2');
        expect(remote.requests.length).toBe(before);
        expect(other.output()).not.toContain(c.secret);
        expect(other.output()).not.toContain(u.token);
      } finally {
        await other.stop();
      }
    }
  });
});

describe('delegated tokens under the policy', () => {
  it("an actor: rule decides on the acting client; the user's own client is not matched by it", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'actor-policy-'));
    const file = join(dir, 'policy.yaml');
    writeFileSync(
      file,
      `rules:
  - {service: mail, tool: send_mail, actor: "*", effect: deny}
  - {service: mail, tool: create_calendar_event, actor: [other-agent], effect: deny}
  - effect: allow
`,
    );
    const policed = await startGatewayProcess(
      gatewayEnv(
        { services: { mail: tool.url }, platform: ks, redisUrl: inject('redisUrl') },
        { GATEWAY_POLICY_FILE: file },
      ),
    );
    try {
      const u = await newUser('actor-policy');
      const agent = await platformToken(ks, {
        sub: u.sub,
        email: u.email,
        scope: 'mcp:mail',
        act: { sub: 'reporting-agent' },
      });
      const toolCall = (token: string, name: string) =>
        call(`${policed.url}/mail/mcp`, {
          method: 'POST',
          token,
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'tools/call',
            params: { name, arguments: {} },
          }),
        });
      const refused = await toolCall(agent, 'send_mail');
      expect(refused.status).toBe(403);
      expect(errorOf(refused)).toMatchObject({ code: 'FORBIDDEN_TOOL', reason: 'policy_denied' });
      expect((await toolCall(u.token, 'send_mail')).status).toBe(200);
      const before = tool.requests.length;
      expect((await toolCall(agent, 'create_calendar_event')).status).toBe(200);
      expect(verifyRecorded(tool.requests[before]!)).toMatchObject({
        actor: 'reporting-agent',
        email: u.email,
      });
    } finally {
      await policed.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('secrets', () => {
  it('the platform token reaches no upstream; no upstream or platform token appears in any log line (trace level)', async () => {
    const everything = JSON.stringify([remote.requests, tool.requests]);
    const platformTokens = new Set(idp.exchanges.map((e) => e.subjectToken));
    expect(platformTokens.size).toBeGreaterThan(5);
    for (const t of platformTokens) expect(everything.includes(t)).toBe(false);
    // Not a fragment either: a token's signature part is what makes it usable.
    for (const t of platformTokens) expect(everything.includes(t.split('.')[2]!)).toBe(false);
    const output = gw.output();
    // At trace the gateway writes its debug lines too (one per request, one per exchange).
    expect(output).toContain('"msg":"upstream token exchanged"');
    const upstreamTokens = idp.exchanges.map((e) => e.answer).filter((a) => a.startsWith('up-'));
    expect(upstreamTokens.length).toBeGreaterThan(5);
    for (const t of [...platformTokens, ...upstreamTokens]) expect(output.includes(t)).toBe(false);
    expect(output.includes(GATEWAY_CLIENT_SECRET)).toBe(false);
  });
});
