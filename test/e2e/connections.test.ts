// Connections end to end, every part real and independent, over loopback HTTP: panva's oidc-provider as the
// upstream's authorization server; a third-party MCP server (the MCP SDK v2 server) that accepts only access
// tokens that authorization server says are active (RFC 7662 introspection on every request) and records every
// request it receives; a `platform idp` process holding the connection; a `platform gateway` process with a
// `remote` service whose upstream connection it is; headless Chromium for the user's connect flow; the MCP SDK v2
// client for the calls. What the other tests show against stand-ins (test/idp/connections, test/gateway/
// upstream-auth, test/idp/token-exchange-connections) must hold once the parts meet: before connecting −32042
// with the connect URL; after connecting, the remote sees the user's own upstream token and nothing of ours;
// disconnect, revoke-user and block cut the next call within 1 s; a refresh the upstream refuses drops the grant;
// two users' tokens are never mixed under 50 concurrent calls.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client,
  StreamableHTTPClientTransport,
  UrlElicitationRequiredError,
} from '@modelcontextprotocol/client';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { type AuthInfo, createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { GrantSealer } from '../../idp/connections/seal.ts';
import { launchChromium, runPlatform, tempConfigHome } from '../cli/support.ts';
import {
  call,
  errorOf,
  forgetSharedKeySets,
  type GatewayResponse,
  IDENTITY_SECRET,
} from '../gateway/helpers.ts';
import { callAdminApi } from '../helpers/admin-api.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { dpopFetch, jktOf, newDpopKey, postFormWithProof } from '../helpers/dpop-client.ts';
import { obtainCode, sessionCookieName, signIn } from '../helpers/oauth.ts';
import {
  freePort,
  type GatewayProcess,
  type IdpProcess,
  startGatewayProcess,
  startIdpProcess,
} from '../helpers/processes.ts';
import { startUpstreamAs, type UpstreamAs } from '../helpers/upstream-as.ts';

const NAME = 'acme';
const CONNECTIONS_KEY = randomBytes(32).toString('base64');
// Base64 characters, as `openssl rand -base64 48` makes them (+ / = change under form-encoding).
const GATEWAY_SECRET = `${randomBytes(36).toString('base64')}+/=`;
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';

// ---------------------------------------------------------------------------------------------------------------
// The third-party MCP server: it knows nothing of the platform, only its own authorization server.

interface RemoteRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  bearer: string | undefined;
  /** The upstream user the authorization server said the bearer belongs to; undefined: refused (401). */
  user: string | undefined;
}

interface RemoteMcp {
  mcpUrl: string;
  host: string;
  requests: RemoteRequest[];
  close(): Promise<void>;
}

/** Asks the authorization server whether `token` is active (RFC 7662), as the upstream's resource server. */
async function introspect(as: UpstreamAs, token: string): Promise<string | undefined> {
  const { clientId, clientSecret } = as.resourceServer;
  const res = await fetch(as.introspectionEndpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
    },
    body: new URLSearchParams({ token, token_type_hint: 'access_token' }),
  });
  const answer = (await res.json()) as { active?: boolean; sub?: string; token_type?: string };
  // An access token only (oidc-provider names no token_type for a refresh token).
  return answer.active === true && answer.token_type === 'Bearer' ? answer.sub : undefined;
}

async function startRemoteMcp(as: UpstreamAs): Promise<RemoteMcp> {
  const requests: RemoteRequest[] = [];
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name: 'acme-remote', version: '1.0.0' });
      server.registerTool(
        'upstream_whoami',
        { description: 'whom the bearer belongs to at acme', inputSchema: z.object({}) },
        async (_args, ctx) => {
          const user = String(ctx.http?.authInfo?.extra?.user ?? '');
          return { content: [{ type: 'text', text: user }], structuredContent: { user } };
        },
      );
      return server;
    },
    { legacy: 'stateless' },
  );
  const node = toNodeHandler(handler);
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const user = bearer === undefined ? undefined : await introspect(as, bearer);
    requests.push({
      method: req.method!,
      url: req.url!,
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: raw.toString('utf8'),
      bearer,
      user,
    });
    if (user === undefined) {
      res.writeHead(401, {
        'www-authenticate': 'Bearer error="invalid_token"',
        'content-type': 'application/json',
      });
      res.end('{"error":"invalid_token"}');
      return;
    }
    if (req.url !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    const auth: AuthInfo = { token: bearer!, clientId: 'acme', scopes: [], extra: { user } };
    let parsed: unknown;
    try {
      parsed = raw.length ? JSON.parse(raw.toString('utf8')) : undefined;
    } catch {
      parsed = undefined;
    }
    await node(Object.assign(req, { auth }), res, parsed);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    mcpUrl: `${url}/mcp`,
    host: new URL(url).host,
    requests,
    close: async () => {
      await handler.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------

let dir: string;
let db: TestDatabase;
let browser: Browser;
let upstream: UpstreamAs;
let remote: RemoteMcp;
let idp: IdpProcess;
let gw: GatewayProcess;
let admin: SeededUser;
let adminToken: string;
/** Every platform access token this file obtained: none may reach the remote server. */
const platformTokens: string[] = [];
/** Every web session used: no cookie of ours may reach the remote server. */
const sessions: string[] = [];
const sealer = new GrantSealer(CONNECTIONS_KEY);
/** What gateways started and stopped by a test wrote. */
let otherOutput = '';

/** A `platform gateway` fronting the remote server as `acme`; its public URL is where clients reach it (DPoP htu). */
async function startGateway(): Promise<GatewayProcess> {
  const port = await freePort();
  return startGatewayProcess(
    {
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
      GATEWAY_SERVICES: NAME,
      ACME_MCP_UPSTREAM: remote.mcpUrl,
      ACME_UPSTREAM_KIND: 'remote',
      ACME_UPSTREAM_CONNECTION: NAME,
      GATEWAY_CLIENT_SECRET: GATEWAY_SECRET,
      PLATFORM_ISSUER: idp.issuer,
      PLATFORM_AUDIENCE: idp.audience,
      REDIS_URL: inject('redisUrl'),
      LOG_LEVEL: 'trace',
    },
    port,
  );
}

beforeAll(async () => {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  dir = await mkdtemp(join(tmpdir(), 'e2e-connections-'));
  [db, browser, upstream] = await Promise.all([
    createTestDatabase(),
    launchChromium(),
    startUpstreamAs({ redirectUris: [`${issuer}/connections/${NAME}/callback`] }),
  ]);
  remote = await startRemoteMcp(upstream);
  await writeFile(join(dir, 'acme-secret'), upstream.clientSecret);
  await writeFile(
    join(dir, 'connections.yaml'),
    `connections:
  - name: ${NAME}
    kind: oauth
    display_name: Acme Cloud
    issuer: ${upstream.issuer}
    client_id: ${upstream.clientId}
    client_secret_file: ${join(dir, 'acme-secret')}
    scopes: [openid, offline_access, repo]
`,
  );
  admin = await seedUser(db.pool);
  sessions.push(admin.sessionToken);
  await forgetSharedKeySets(inject('redisUrl'), issuer);
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    port,
    env: {
      PLATFORM_CONNECTIONS_FILE: join(dir, 'connections.yaml'),
      PLATFORM_CONNECTIONS_KEY: CONNECTIONS_KEY,
      PLATFORM_GATEWAY_CLIENT_SECRET: GATEWAY_SECRET,
      PLATFORM_SERVICES: `platform,${NAME}`,
      PLATFORM_ADMIN_EMAILS: admin.email,
      PLATFORM_RATE_LIMITS: 'token=1000000/60,revoke=100000/60,device=100000/60',
      LOG_LEVEL: 'trace',
    },
  });
  gw = await startGateway();
  adminToken = (await signIn(idp.issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
  platformTokens.push(adminToken);
}, 90_000);

afterAll(async () => {
  await gw?.stop();
  await idp?.stop();
  await browser?.close();
  await Promise.all([remote?.close(), upstream?.close()]);
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface User extends SeededUser {
  /** The account the user signs in with at the upstream. */
  upstreamAccount: string;
}

async function newUser(label: string): Promise<User> {
  const u = await seedUser(db.pool);
  sessions.push(u.sessionToken);
  return { ...u, upstreamAccount: `${label}-${randomBytes(4).toString('hex')}@acme` };
}

/** A platform access token for the user (the web session's sign-in), for the acme service. */
async function platformToken(u: User): Promise<string> {
  const { access_token } = await signIn(idp.issuer, u.sessionToken, { scope: 'openid email mcp:acme' });
  platformTokens.push(access_token);
  return access_token;
}

/** The user connects acme in Chromium through the IdP's pages, approving as their account at oidc-provider. */
async function connectInBrowser(u: User): Promise<string> {
  const context = await browser.newContext();
  try {
    await context.addCookies([
      { name: sessionCookieName(idp.issuer), value: u.sessionToken, url: idp.issuer },
    ]);
    const page = await context.newPage();
    upstream.account = u.upstreamAccount;
    const finished = page.waitForResponse((r) =>
      r.url().startsWith(`${idp.issuer}/connections/${NAME}/callback`),
    );
    await page.goto(`${idp.issuer}/connections/${NAME}`);
    expect((await finished).status()).toBe(200);
    return await page.locator('main').innerText();
  } finally {
    await context.close();
  }
}

/**
 * What a careless client also sends the gateway: the IdP's web-session cookie and an x-platform-* header of its
 * own (neither may reach the upstream).
 */
const ourHeaders = () => ({
  cookie: `${sessionCookieName(idp.issuer)}=${sessions[0]}`,
  'x-platform-identity': 't=1,v4=forged-by-the-client',
});

async function sdkClient(token: string): Promise<Client> {
  const client = new Client({ name: 'e2e-connections', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gw.url}/${NAME}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}`, ...ourHeaders() } },
    }),
  );
  return client;
}

/** The SDK v2 client's call of the remote tool: the upstream user it ran as, or the error it threw. */
async function sdkWhoami(token: string): Promise<string | Error> {
  try {
    const client = await sdkClient(token);
    try {
      const r = await client.callTool({ name: 'upstream_whoami', arguments: {} });
      return String((r.structuredContent as { user?: string } | undefined)?.user);
    } finally {
      await client.close();
    }
  } catch (err) {
    return err as Error;
  }
}

/** One MCP 2026-07-28 tools/call of the remote tool, raw (no handshake), with the JSON-RPC id `id`. */
function whoamiCall(token: string, id: number | string = 1, via = gw): Promise<GatewayResponse> {
  return call(`${via.url}/${NAME}/mcp`, {
    method: 'POST',
    token,
    headers: {
      ...ourHeaders(),
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

/** What a whoamiCall came to: the upstream user, `-32042 <url>`, or `<status> <code>`. */
function outcome(r: GatewayResponse): string {
  if (r.status === 200 && r.json.result) return String(r.json.result.structuredContent?.user);
  if (r.status === 200 && r.json.error?.code === -32042)
    return `-32042 ${r.json.error.data?.elicitations?.[0]?.url}`;
  return `${r.status} ${errorOf(r).code}`;
}

const connectUri = () => `${idp.issuer}/connections/${NAME}`;

/** The exchanges the IdP audited for the user (one row each). */
async function exchangesOf(u: User): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM platform.issuance_audit WHERE user_id = $1 AND grant_type = $2 AND connection = $3`,
    [String(u.id), EXCHANGE, NAME],
  );
  return rows[0]!.n;
}

async function storedGrant(u: User) {
  const { rows } = await db.pool.query<{ sealed: Buffer }>(
    'SELECT sealed FROM platform.connection_grants WHERE user_id = $1 AND connection = $2',
    [String(u.id), NAME],
  );
  return rows[0] ? sealer.open(String(u.id), NAME, rows[0].sealed) : undefined;
}

/** Calls until the answer is no longer `was`; the answer and the milliseconds it took (3 s at most). */
async function nextRefusal(token: string, was: string, via = gw): Promise<{ answer: string; ms: number }> {
  const start = performance.now();
  for (;;) {
    const answer = outcome(await whoamiCall(token, 1, via));
    const ms = performance.now() - start;
    if (answer !== was || ms > 3000) return { answer, ms };
  }
}

const adminApi = (method: 'GET' | 'POST', path: string, body?: unknown) =>
  callAdminApi(idp.issuer, adminToken, method, path, body);

let alice: User;
let bob: User;

describe('before connecting', () => {
  it('the SDK v2 client gets −32042 with the IdP’s connect URL; the remote server is not contacted', async () => {
    alice = await newUser('alice');
    const token = await platformToken(alice);
    const before = remote.requests.length;
    const err = await sdkWhoami(token);
    expect(err).toBeInstanceOf(UrlElicitationRequiredError);
    expect((err as UrlElicitationRequiredError).elicitations).toEqual([
      expect.objectContaining({ mode: 'url', url: connectUri(), elicitationId: expect.any(String) }),
    ]);
    expect(remote.requests.length).toBe(before);
    expect(await exchangesOf(alice)).toBe(0);
  });
});

describe('connected', () => {
  it('the user connects in Chromium (consent at oidc-provider); the remote server then sees the user’s upstream token', async () => {
    const authorizedBefore = upstream.grants.authorization_code ?? 0;
    expect(await connectInBrowser(alice)).toContain('Acme Cloud is connected');
    expect((upstream.grants.authorization_code ?? 0) - authorizedBefore).toBe(1);
    const grant = (await storedGrant(alice))!;
    expect(upstream.issuedTokens).toContain(grant.accessToken);

    const token = await platformToken(alice);
    const before = remote.requests.length;
    expect(await sdkWhoami(token)).toBe(alice.upstreamAccount);
    const seen = remote.requests.slice(before);
    // initialize, notifications/initialized, tools/call: each with the token oidc-provider issued to the user.
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (const r of seen) {
      expect(r.bearer).toBe(grant.accessToken);
      expect(r.user).toBe(alice.upstreamAccount);
      expect(r.headers.host).toBe(remote.host);
    }
    expect(seen.some((r) => r.body.includes('"tools/call"'))).toBe(true);
  });

  it('the remote server itself takes only oidc-provider’s access tokens: a platform token or a refresh token is 401', async () => {
    const direct = async (bearer: string) =>
      (
        await fetch(remote.mcpUrl, {
          method: 'POST',
          headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
          body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
        })
      ).status;
    const grant = (await storedGrant(alice))!;
    expect(await direct(await platformToken(alice))).toBe(401);
    expect(await direct(grant.refreshToken!)).toBe(401);
    expect(await direct(`${grant.accessToken}x`)).toBe(401);
    // Dropped from the record: these requests were the test's own, not the gateway's.
    remote.requests.splice(-3);
  });

  it('a DPoP-bound platform token (as `platform login` gets one): exchanged, and neither it nor its proof reaches the remote', async () => {
    const key = await newDpopKey();
    const c = await obtainCode({
      issuer: idp.issuer,
      sessionToken: alice.sessionToken,
      params: { scope: 'openid email mcp:acme' },
    });
    const t = await postFormWithProof(
      `${idp.issuer}/oauth/token`,
      {
        grant_type: 'authorization_code',
        code: c.code,
        code_verifier: c.verifier,
        redirect_uri: c.redirectUri,
        client_id: c.clientId,
      },
      key,
    );
    expect(t.status, t.text).toBe(200);
    expect(t.json.token_type).toBe('DPoP');
    const token = String(t.json.access_token);
    platformTokens.push(token);
    expect(jktOf(token)).toBe(key.thumbprint);
    const client = new Client({ name: 'e2e-connections-dpop', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gw.url}/${NAME}/mcp`), {
        fetch: dpopFetch(key.session, () => token),
      }),
    );
    const before = remote.requests.length;
    const r = await client.callTool({ name: 'upstream_whoami', arguments: {} });
    await client.close();
    expect(r.structuredContent).toEqual({ user: alice.upstreamAccount });
    const seen = remote.requests.slice(before);
    expect(seen.length).toBeGreaterThanOrEqual(1);
    for (const q of seen) {
      expect(q.bearer).toBe((await storedGrant(alice))!.accessToken);
      expect(q.headers.dpop).toBeUndefined();
    }
  });

  it('two users, 50 concurrent calls, never mixed: each upstream request carries the calling user’s token', async () => {
    const [carol, dave] = [await newUser('carol'), await newUser('dave')];
    await connectInBrowser(carol);
    await connectInBrowser(dave);
    const [carolToken, daveToken] = [await platformToken(carol), await platformToken(dave)];
    const tokenOf = new Map([
      [carol.upstreamAccount, (await storedGrant(carol))!.accessToken],
      [dave.upstreamAccount, (await storedGrant(dave))!.accessToken],
    ]);
    expect(new Set(tokenOf.values()).size).toBe(2);
    const callers = Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? carol : dave));
    const before = remote.requests.length;
    // Neither user has a cached token: their first calls arrive together and wait on their exchanges together.
    const answers = await Promise.all(
      callers.map((u, i) => whoamiCall(u === carol ? carolToken : daveToken, i)),
    );
    for (const [i, r] of answers.entries()) expect(outcome(r), `call ${i}`).toBe(callers[i]!.upstreamAccount);
    const seen = remote.requests.slice(before);
    expect(seen).toHaveLength(50);
    for (const r of seen) {
      const caller = callers[JSON.parse(r.body).id as number]!;
      expect(r.user).toBe(caller.upstreamAccount);
      expect(r.bearer).toBe(tokenOf.get(caller.upstreamAccount));
    }
    // One exchange per user however many calls waited for it.
    expect(await exchangesOf(carol)).toBe(1);
    expect(await exchangesOf(dave)).toBe(1);
  });
});

describe('cutting the user off', () => {
  it('platform connections disconnect: revoked at oidc-provider, every gateway’s cached token dropped: the next call is −32042 within 1 s', async () => {
    const token = await platformToken(alice);
    // A second gateway (another replica) holds the user's token too.
    const other = await startGateway();
    try {
      for (const via of [gw, other])
        expect(outcome(await whoamiCall(token, 1, via))).toBe(alice.upstreamAccount);
      const home = await tempConfigHome();
      const revocationsBefore = upstream.revocations;
      const off = await runPlatform(['connections', 'disconnect', NAME], {
        XDG_CONFIG_HOME: home.dir,
        PLATFORM_ISSUER: idp.issuer,
        PLATFORM_TOKEN: token,
      });
      await home.cleanup();
      expect(off.stdout.trim()).toBe(`disconnected ${NAME} (revoked at the upstream)`);
      expect(upstream.revocations).toBeGreaterThan(revocationsBefore);
      // Each gateway's cached token went with the grant: the next call is −32042 and nothing reaches the remote
      // server (it is not left to the upstream to refuse a token it may still honour: a self-contained one
      // would stay valid there until it expires).
      const before = remote.requests.length;
      for (const via of [gw, other]) {
        const refused = await nextRefusal(token, alice.upstreamAccount, via);
        expect(refused.ms).toBeLessThan(1000);
        expect(refused.answer).toBe(`-32042 ${connectUri()}`);
      }
      const err = await sdkWhoami(token);
      expect(err).toBeInstanceOf(UrlElicitationRequiredError);
      expect(remote.requests.length).toBe(before);
      expect(await storedGrant(alice)).toBeUndefined();
    } finally {
      await other.stop();
      otherOutput += other.output();
    }
  });

  it('revoke-user: the next call is refused within 1 s; a new sign-in works without reconnecting, exchanged afresh', async () => {
    bob = await newUser('bob');
    await connectInBrowser(bob);
    const token = await platformToken(bob);
    expect(outcome(await whoamiCall(token))).toBe(bob.upstreamAccount);
    expect(await exchangesOf(bob)).toBe(1);
    const authorizedBefore = upstream.grants.authorization_code ?? 0;
    const r = await adminApi('POST', '/admin/api/revoke-user', { email: bob.email });
    expect(r.status).toBe(200);
    const refused = await nextRefusal(token, bob.upstreamAccount);
    expect(refused.ms).toBeLessThan(1000);
    expect(refused.answer).toBe('401 INVALID_TOKEN');
    // Signing in again (past the cut-off's second): the stored grant serves, but not the token cached before.
    let again = '';
    await expect
      .poll(
        async () => {
          again = await platformToken(bob);
          return outcome(await whoamiCall(again));
        },
        { timeout: 5000 },
      )
      .toBe(bob.upstreamAccount);
    expect(await exchangesOf(bob)).toBe(2);
    expect(upstream.grants.authorization_code ?? 0).toBe(authorizedBefore);
    expect(outcome(await whoamiCall(token))).toBe('401 INVALID_TOKEN');
    expect(outcome(await whoamiCall(again))).toBe(bob.upstreamAccount);
  });

  it('block: the next call is refused within 1 s; after unblock a new sign-in works without reconnecting', async () => {
    const token = await platformToken(bob);
    expect(outcome(await whoamiCall(token))).toBe(bob.upstreamAccount);
    const exchanged = await exchangesOf(bob);
    const authorizedBefore = upstream.grants.authorization_code ?? 0;
    expect((await adminApi('POST', '/admin/api/block', { email: bob.email })).status).toBe(200);
    const refused = await nextRefusal(token, bob.upstreamAccount);
    expect(refused.ms).toBeLessThan(1000);
    expect(refused.answer).toBe('401 INVALID_TOKEN');
    await expect(platformToken(bob)).rejects.toThrow();
    expect((await adminApi('POST', '/admin/api/unblock', { email: bob.email })).status).toBe(200);
    await expect
      .poll(async () => outcome(await whoamiCall(await platformToken(bob))), { timeout: 5000 })
      .toBe(bob.upstreamAccount);
    expect(await exchangesOf(bob)).toBeGreaterThan(exchanged);
    expect(upstream.grants.authorization_code ?? 0).toBe(authorizedBefore);
    expect(await storedGrant(bob)).toBeDefined();
  });

  it('the upstream refusing the refresh: the grant is dropped and the client gets −32042 again', async () => {
    const erin = await newUser('erin');
    // Short-lived upstream access tokens: every exchange finds the grant due and refreshes it first (and the
    // gateway, told it expires within its 60 s margin, caches none).
    upstream.accessTtl = 30;
    try {
      await connectInBrowser(erin);
      const token = await platformToken(erin);
      const refreshedBefore = upstream.grants.refresh_token ?? 0;
      expect(outcome(await whoamiCall(token))).toBe(erin.upstreamAccount);
      expect((upstream.grants.refresh_token ?? 0) - refreshedBefore).toBe(1);
      const refreshed = (await storedGrant(erin))!;
      expect(remote.requests.at(-1)!.bearer).toBe(refreshed.accessToken);
      // The grant ends at oidc-provider (the user revoked the platform's access there).
      const res = await fetch(`${upstream.issuer}/token/revocation`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${upstream.clientId}:${upstream.clientSecret}`).toString('base64')}`,
        },
        body: new URLSearchParams({ token: refreshed.refreshToken!, token_type_hint: 'refresh_token' }),
      });
      expect(res.status).toBe(200);
      const before = remote.requests.length;
      const err = await sdkWhoami(token);
      expect(err).toBeInstanceOf(UrlElicitationRequiredError);
      expect((err as UrlElicitationRequiredError).elicitations[0]).toMatchObject({ url: connectUri() });
      expect(remote.requests.length).toBe(before);
      expect(await storedGrant(erin)).toBeUndefined();
    } finally {
      upstream.accessTtl = 3600;
    }
  });
});

describe('nothing of ours reaches the upstream', () => {
  it('no platform token, x-platform-* header or cookie of ours in any request the remote server received', () => {
    expect(remote.requests.length).toBeGreaterThan(50);
    expect(platformTokens.length).toBeGreaterThan(8);
    const everything = JSON.stringify(remote.requests);
    for (const t of platformTokens) {
      expect(everything.includes(t)).toBe(false);
      // Not its signature either: that is what makes it usable.
      expect(everything.includes(t.split('.')[2]!)).toBe(false);
    }
    for (const s of sessions) expect(everything.includes(s)).toBe(false);
    expect(everything.includes(GATEWAY_SECRET)).toBe(false);
    for (const r of remote.requests) {
      expect(Object.keys(r.headers).filter((h) => h.startsWith('x-platform-'))).toEqual([]);
      expect(r.headers.cookie).toBeUndefined();
      expect(r.headers.host).toBe(remote.host);
      // Every bearer the remote server got is one oidc-provider issued.
      expect(upstream.issuedTokens).toContain(r.bearer);
    }
  });

  it('no upstream token in any line the IdP or the gateway wrote (trace level)', () => {
    const output = idp.output() + gw.output() + otherOutput;
    expect(output).toContain('connection token exchanged');
    expect(output).toContain('upstream token exchanged');
    for (const t of upstream.issuedTokens) expect(output.includes(t)).toBe(false);
    expect(output.includes(GATEWAY_SECRET)).toBe(false);
  });
});
