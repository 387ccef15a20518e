// Shared by the tool-server tests: signed identity headers (what the gateway adds), a real MCP SDK client
// that signs every request, an in-process server with captured logs, and a switchable TCP path to Postgres.
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import {
  type CallToolResult,
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { z } from 'zod';
import type { Identity } from '../../lib/identity.ts';
import { bodySha256, deriveIdentityKey, signIdentity } from '../../lib/identity.ts';
import { createLogger } from '../../lib/logger.ts';
import { loadToolConfig, type ToolServerConfig } from '../../tools/config.ts';
import { defineTool } from '../../tools/kit/tool.ts';
import { type RunningToolServer, startToolServer } from '../../tools/server.ts';
import { startTcpRelay } from '../helpers/tcp-relay.ts';

/** The gateway's master secret in these tests; a tool server gets only its own key (toolKey). */
export const IDENTITY_SECRET = 'tools-test-identity-secret-0123456789abcdef';

/** TOOL_IDENTITY_KEY for one service, as `platform identity-key <service>` prints it. */
export function toolKey(service: string): string {
  return deriveIdentityKey(IDENTITY_SECRET, service);
}

export function identityFor(user: { email: string; sub: string }, over: Partial<Identity> = {}): Identity {
  return {
    email: user.email,
    sub: user.sub,
    issuer: 'platform',
    scope: 'openid email mcp:platform mcp:mail mcp:deals',
    clientId: 'test-client',
    jti: randomUUID(),
    requestId: randomUUID(),
    ...over,
  };
}

/** The request a set of identity headers is made for. */
export interface RequestToSign {
  /** The tool server's URL (its path and query are signed). */
  url: string | URL;
  method?: string;
  body?: string | Uint8Array;
}

/**
 * Headers exactly as the gateway would add them for this request, signed now (or at `t`) with the service's key
 * (the service is the URL's first path segment unless given), or with `key` when a test forges one.
 */
export function signedHeaders(
  identity: Identity,
  request: RequestToSign,
  opts: { key?: string; service?: string; t?: number } = {},
): Record<string, string> {
  const u = new URL(request.url);
  const service = opts.service ?? u.pathname.split('/')[1] ?? '';
  const body = typeof request.body === 'string' ? Buffer.from(request.body) : request.body;
  return signIdentity(
    opts.key ?? toolKey(service),
    {
      service,
      method: request.method ?? 'POST',
      path: u.pathname + u.search,
      bodySha256: bodySha256(body),
    },
    { ...identity, requestId: randomUUID() },
    opts.t,
  );
}

/**
 * Which client: `modern` is the SDK v2 client pinned to 2026-07-28 (no handshake, `_meta` on every request);
 * `legacy` is the v1 SDK client (the 2025-11-25 `initialize` handshake), as older connectors still are.
 */
export type Era = 'modern' | 'legacy';

export interface ToolInputSchema {
  type: string;
  properties?: Record<string, unknown>;
  required?: string[];
}

export interface McpConnection {
  era: Era;
  /** The session id the server gave a legacy client; tool servers give none. */
  sessionId(): string | undefined;
  /** The protocol version the connection settled on. */
  protocolVersion(): string | undefined;
  /** Swaps the identity used for the following requests. */
  actAs(identity: Identity): void;
  listTools(): Promise<Array<{ name: string; description?: string; inputSchema: ToolInputSchema }>>;
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

/** The MCP SDK's own client of either era over streamable HTTP; every HTTP request it makes is freshly signed. */
export async function connectMcp(
  mcpUrl: string,
  identity: Identity,
  era: Era = 'modern',
): Promise<McpConnection> {
  let current = identity;
  const signingFetch = (url: string | URL, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    // The SDK sends JSON-RPC bodies as strings; anything else would not be signed faithfully here.
    const body = init?.body;
    if (body !== undefined && body !== null && typeof body !== 'string') {
      throw new TypeError('connectMcp: only string bodies are signed');
    }
    const signed = signedHeaders(current, { url, method: init?.method ?? 'GET', body: body ?? undefined });
    for (const [k, v] of Object.entries(signed)) headers.set(k, v);
    return fetch(url, { ...init, headers });
  };
  const actAs = (next: Identity) => {
    current = next;
  };
  if (era === 'legacy') {
    const transport = new LegacyTransport(new URL(mcpUrl), { fetch: signingFetch });
    const client = new LegacyClient({ name: 'tools-test-legacy', version: '1.0.0' });
    await client.connect(transport);
    return {
      era,
      sessionId: () => transport.sessionId,
      protocolVersion: () => transport.protocolVersion,
      actAs,
      listTools: async () => (await client.listTools()).tools,
      call: (name, args = {}) => client.callTool({ name, arguments: args }) as Promise<CallToolResult>,
      async close() {
        await transport.terminateSession().catch(() => {});
        await client.close();
      },
    };
  }
  const transport = new ModernTransport(new URL(mcpUrl), { fetch: signingFetch });
  const client = new ModernClient(
    { name: 'tools-test', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(transport);
  return {
    era,
    sessionId: () => transport.sessionId,
    protocolVersion: () => client.getNegotiatedProtocolVersion(),
    actAs,
    listTools: async () => (await client.listTools()).tools,
    call: (name, args = {}) => client.callTool({ name, arguments: args }) as Promise<CallToolResult>,
    close: () => client.close(),
  };
}

/** The JSON a tool returned: structuredContent on success, the error object parsed from text on failure. */
export function toolJson(r: CallToolResult): Record<string, unknown> {
  if (!r.isError) return r.structuredContent as Record<string, unknown>;
  const first = r.content[0];
  if (first?.type !== 'text') throw new Error('tool error without text content');
  return JSON.parse(first.text) as Record<string, unknown>;
}

export interface InProcessServer extends RunningToolServer {
  mcpUrl: string;
  logs(): Array<Record<string, unknown>>;
}

/** `startToolServer` in this process on a free port, with its JSON logs captured. */
export async function startInProcess(
  name: string,
  env: Record<string, string | undefined>,
  overrides: Partial<ToolServerConfig> = {},
): Promise<InProcessServer> {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      cb();
    },
  });
  const loaded = loadToolConfig(name, {
    TOOL_IDENTITY_KEY: toolKey(name),
    [`${name.toUpperCase()}_MCP_PORT`]: '0',
    LOG_LEVEL: 'debug',
    ...env,
  });
  const config = { ...loaded, ...overrides };
  const log = createLogger({ name: `tool-${name}`, level: config.logLevel, destination });
  const server = await startToolServer(config.service, config, { log, host: '127.0.0.1' });
  return {
    ...server,
    mcpUrl: `${server.url}/${name}/mcp`,
    logs: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

/**
 * A TCP relay to Postgres that the test can cut: "the database went down" without touching the shared server.
 * `down()` closes the listener and every relayed connection (new connections are refused); `up()` reopens.
 */
export interface PostgresRelay {
  url: string;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startPostgresRelay(targetUrl: string): Promise<PostgresRelay> {
  const relay = await startTcpRelay(Number(new URL(targetUrl).port || 5432));
  return { url: relay.urlFor(targetUrl), down: relay.down, up: relay.up, close: relay.down };
}

/** A tool that fails with an unexpected error: the 500 path and its log line. */
export const crashTool = defineTool({
  name: 'crash',
  title: 'Crash',
  description: 'Always fails unexpectedly.',
  input: z.object({}),
  output: z.object({ ok: z.boolean() }),
  async run() {
    throw new Error('boom');
  },
});
