import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../../lib/logger.ts';
import { JsonRpcHttpError } from './errors.ts';
import { type CallerInfo, callerAuthInfo } from './tool.ts';

/**
 * The MCP session manager: one SDK transport + McpServer per `Mcp-Session-Id`, as the SDK's stateful
 * streamable HTTP mode expects. A session is bound to the caller who opened it: a session id presented with
 * another caller's identity is answered like an unknown one, so a leaked id is worth nothing to someone else.
 */
export interface SessionManager {
  /** `body`: the POST body, already read, verified and parsed (kit/identity.ts readAuthenticatedRequest). */
  handle(req: IncomingMessage, res: ServerResponse, caller: CallerInfo, body: unknown): Promise<void>;
  readonly size: number;
  /** Ends the long-lived GET event streams, so a drain waits only for real in-flight requests. */
  endStreams(): void;
  close(): Promise<void>;
}

export interface SessionManagerOptions {
  createServer(): McpServer;
  log: Logger;
  idleMs: number;
  /** Sessions one caller may hold; opening one more closes that caller's least recently used. */
  maxPerCaller?: number;
}

interface Session {
  id: string;
  owner: string;
  server: McpServer;
  transport: StreamableHTTPServerTransport;
  lastSeen: number;
}

const SESSION_HEADER = 'mcp-session-id';

function ownerOf(caller: CallerInfo): string {
  return `${caller.identity.issuer}\n${caller.identity.sub}\n${caller.identity.email.toLowerCase()}`;
}

export function createSessionManager(opts: SessionManagerOptions): SessionManager {
  const { log } = opts;
  const maxPerCaller = opts.maxPerCaller ?? 32;
  const sessions = new Map<string, Session>();

  async function closeSession(s: Session, why: string): Promise<void> {
    sessions.delete(s.id);
    log.info({ sessionId: s.id, why }, 'MCP session closed');
    await s.server.close().catch((err: unknown) => log.warn({ err }, 'closing MCP session failed'));
  }

  const sweeper = setInterval(
    () => {
      const cutoff = Date.now() - opts.idleMs;
      for (const s of sessions.values()) if (s.lastSeen < cutoff) void closeSession(s, 'idle');
    },
    Math.min(60_000, opts.idleMs),
  );
  sweeper.unref();

  async function open(
    req: IncomingMessage,
    res: ServerResponse,
    caller: CallerInfo,
    body: unknown,
  ): Promise<void> {
    const owner = ownerOf(caller);
    const mine = [...sessions.values()]
      .filter((s) => s.owner === owner)
      .sort((a, b) => a.lastSeen - b.lastSeen);
    if (mine.length >= maxPerCaller) await closeSession(mine[0]!, 'caller opened too many sessions');
    const server = opts.createServer();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { id, owner, server, transport, lastSeen: Date.now() });
        log.info({ sessionId: id, caller: caller.identity.email }, 'MCP session opened');
      },
      onsessionclosed: (id) => {
        sessions.delete(id);
        log.info({ sessionId: id, why: 'client' }, 'MCP session closed');
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(Object.assign(req, { auth: callerAuthInfo(caller) }), res, body);
  }

  return {
    get size() {
      return sessions.size;
    },

    async handle(req, res, caller, body) {
      const sid = req.headers[SESSION_HEADER];
      if (typeof sid !== 'string') {
        if (req.method === 'POST' && isInitializeRequest(body)) return open(req, res, caller, body);
        throw new JsonRpcHttpError(400, -32000, 'Bad Request: No valid session ID provided');
      }
      const s = sessions.get(sid);
      // An unknown id and another caller's id get the same answer: 404 tells the client to re-initialize.
      if (!s || s.owner !== ownerOf(caller)) throw new JsonRpcHttpError(404, -32001, 'Session not found');
      s.lastSeen = Date.now();
      await s.transport.handleRequest(Object.assign(req, { auth: callerAuthInfo(caller) }), res, body);
    },

    endStreams() {
      for (const s of sessions.values()) s.transport.closeStandaloneSSEStream();
    },

    async close() {
      clearInterval(sweeper);
      await Promise.all([...sessions.values()].map((s) => closeSession(s, 'shutdown')));
    },
  };
}
