// Stand-ins for the two parties behind a service with an upstream connection: the platform IdP's token endpoint
// answering RFC 8693 exchanges exactly as docs/gateway.md says the IdP does (HTTP Basic of `platform-gateway`,
// the subject token verified against the key server that signed it, 400 interaction_required with a connect_uri
// for a user who has not connected), and a third-party MCP server (the MCP SDK v2 server) that accepts only the
// tokens it issued and records every request it receives.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { type AuthInfo, createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { createRemoteJWKSet, type JWTVerifyGetKey, jwtVerify } from 'jose';
import { z } from 'zod';

/** Whose tokens the stand-in accepts as subject tokens: an issuer and its key set (a key server, or a real IdP). */
export interface SubjectIssuer {
  issuer: string;
  jwksUrl: string;
}

export const GATEWAY_CLIENT_SECRET = 'upstream-auth-test-gateway-client-secret-0123456789';

function listen(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ),
  );
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

async function readAll(req: AsyncIterable<unknown>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

export interface ExchangeSeen {
  sub: string;
  connection: string;
  subjectToken: string;
  /** What was answered: the upstream token, or `not_connected` / an OAuth error code. */
  answer: string;
}

export interface TokenEndpoint {
  url: string;
  /** Every exchange received, in order. */
  exchanges: ExchangeSeen[];
  /** Every token endpoint request's raw body and headers (the platform token must reach only this party). */
  raw: Array<{ headers: IncomingHttpHeaders; body: string }>;
  /** Stores a user's grant for a connection (what connecting does at the IdP); `token` defaults to a new one. */
  connect(sub: string, connection: string, token?: string): string;
  disconnect(sub: string, connection: string): void;
  /** The upstream token the IdP currently hands out for this user and connection. */
  tokenOf(sub: string, connection: string): string | undefined;
  /** Milliseconds each exchange waits before answering (to hold concurrent callers together). */
  delayMs: number;
  expiresIn: number;
  close(): Promise<void>;
}

/**
 * The IdP's token endpoint for exchanges; `issuer` is where its connect pages live. `subjects` may be a function
 * when the issuer is known only later (a real IdP started after the gateway that must name this endpoint).
 */
export async function startTokenEndpoint(
  subjects: SubjectIssuer | (() => SubjectIssuer),
  issuer = 'https://idp.example.test',
): Promise<TokenEndpoint> {
  let keys: { issuer: string; jwks: JWTVerifyGetKey } | undefined;
  const trust = () => {
    if (keys === undefined) {
      const s = typeof subjects === 'function' ? subjects() : subjects;
      keys = { issuer: s.issuer, jwks: createRemoteJWKSet(new URL(s.jwksUrl)) };
    }
    return keys;
  };
  const grants = new Map<string, string>();
  const exchanges: ExchangeSeen[] = [];
  const raw: TokenEndpoint['raw'] = [];
  const state = { delayMs: 0, expiresIn: 3600 };
  const expectedBasic = `Basic ${Buffer.from(`platform-gateway:${encodeURIComponent(GATEWAY_CLIENT_SECRET)}`).toString('base64')}`;
  const server = createServer(async (req, res) => {
    const body = (await readAll(req)).toString('utf8');
    raw.push({ headers: req.headers, body });
    const answer = (status: number, json: Record<string, unknown>) => {
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(json));
    };
    if (req.method !== 'POST' || req.url !== '/oauth/token') return answer(404, { error: 'not_found' });
    if (req.headers.authorization !== expectedBasic) return answer(401, { error: 'invalid_client' });
    const form = new URLSearchParams(body);
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:token-exchange') {
      return answer(400, { error: 'unsupported_grant_type' });
    }
    if (form.get('subject_token_type') !== 'urn:ietf:params:oauth:token-type:access_token') {
      return answer(400, { error: 'invalid_request' });
    }
    const resource = /^urn:platform:connection:([a-z][a-z0-9-]{0,31})$/.exec(form.get('resource') ?? '');
    if (!resource) return answer(400, { error: 'invalid_target' });
    const connection = resource[1]!;
    const subjectToken = form.get('subject_token') ?? '';
    let sub: string;
    try {
      const { jwks, issuer: expected } = trust();
      const { payload } = await jwtVerify(subjectToken, jwks, { issuer: expected });
      sub = String(payload.sub);
    } catch {
      return answer(400, { error: 'invalid_grant', error_description: 'subject token not valid' });
    }
    if (state.delayMs > 0) await new Promise((r) => setTimeout(r, state.delayMs));
    const token = grants.get(`${sub}\n${connection}`);
    if (token === undefined) {
      exchanges.push({ sub, connection, subjectToken, answer: 'not_connected' });
      return answer(400, {
        error: 'interaction_required',
        error_description: `connect ${connection} first`,
        connect_uri: `${issuer}/connections/${connection}`,
      });
    }
    exchanges.push({ sub, connection, subjectToken, answer: token });
    answer(200, {
      access_token: token,
      issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      token_type: 'Bearer',
      expires_in: state.expiresIn,
    });
  });
  const url = await listen(server);
  return Object.assign(state, {
    url,
    exchanges,
    raw,
    connect(sub: string, connection: string, token = `up-${randomBytes(12).toString('hex')}`) {
      grants.set(`${sub}\n${connection}`, token);
      return token;
    },
    disconnect(sub: string, connection: string) {
      grants.delete(`${sub}\n${connection}`);
    },
    tokenOf: (sub: string, connection: string) => grants.get(`${sub}\n${connection}`),
    close: () => close(server),
  });
}

export interface RemoteRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  /** The user the bearer belonged to, or undefined when the server refused it. */
  user: string | undefined;
}

export interface RemoteMcpServer {
  url: string;
  /** Its MCP endpoint (what `<SERVICE>_MCP_UPSTREAM` names). */
  mcpUrl: string;
  host: string;
  requests: RemoteRequest[];
  /** Makes `token` valid for `user` (what the upstream's own authorization server would have issued). */
  accept(token: string, user: string): void;
  /** Withdraws a token: the server answers 401 to it from now on. */
  withdraw(token: string): void;
  close(): Promise<void>;
}

/**
 * A third-party MCP server on the SDK v2 server (stateless, both protocol eras) at `/mcp`, accepting only the
 * bearer tokens it was told about. Its one tool, `upstream_whoami`, answers whom the bearer belongs to.
 */
export async function startRemoteMcpServer(): Promise<RemoteMcpServer> {
  const tokens = new Map<string, string>();
  const requests: RemoteRequest[] = [];
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name: 'remote-upstream', version: '1.0.0' });
      server.registerTool(
        'upstream_whoami',
        { description: 'whom the bearer belongs to', inputSchema: z.object({}) },
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
  const server = createServer(async (req, res) => {
    const raw = await readAll(req);
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const user = bearer === undefined ? undefined : tokens.get(bearer);
    requests.push({
      method: req.method!,
      url: req.url!,
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: raw.toString('utf8'),
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
    const auth: AuthInfo = { token: bearer!, clientId: 'remote', scopes: [], extra: { user } };
    let parsed: unknown;
    try {
      parsed = raw.length ? JSON.parse(raw.toString('utf8')) : undefined;
    } catch {
      parsed = undefined;
    }
    await node(Object.assign(req, { auth }), res, parsed);
  });
  const url = await listen(server);
  return {
    url,
    mcpUrl: `${url}/mcp`,
    host: new URL(url).host,
    requests,
    accept: (token, user) => tokens.set(token, user),
    withdraw: (token) => tokens.delete(token),
    close: async () => {
      await handler.close();
      await close(server);
    },
  };
}

export const uniqueSub = (label: string) => `${label}-${randomUUID()}`;
