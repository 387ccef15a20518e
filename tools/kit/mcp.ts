import type { IncomingMessage, ServerResponse } from 'node:http';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { type CacheHint, createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import type { Logger } from '../../lib/logger.ts';
import { createFastPath } from './fast-path.ts';
import type { ToolMonitors } from './monitors.ts';
import { type AnyTool, type CallerInfo, callerAuthInfo, registerTools } from './tool.ts';

/**
 * The MCP endpoint of a tool server, stateless for both protocol eras (the SDK's `createMcpHandler`):
 * - 2026-07-28 requests carry their protocol version in `_meta`, need no `initialize`, and are checked by the
 *   SDK (`Mcp-Method` / `Mcp-Name` against the body → 400 −32020 HeaderMismatch, `server/discover`,
 *   `resultType`, cache hints on `tools/list`);
 * - 2025-11-25 / 2025-06-18 clients run their `initialize` handshake, answered without an `Mcp-Session-Id`
 *   (the SDK's stateless legacy serving); their later requests need no session either. GET (standalone event
 *   stream) and DELETE (session end) answer 405, which those clients accept from a server without sessions.
 * Every request the SDK serves builds a fresh McpServer for its own caller and keeps nothing afterwards, so any
 * replica answers any request. The 2026-07-28 `tools/call` and `tools/list` of a modern connector are answered
 * by the kit's fast path instead (fast-path.ts: the same answers, without a server per request).
 */
export interface McpEndpoint {
  /**
   * `body` is the request's JSON, already read (the identity check needs the bytes first); undefined on GET.
   * Resolves with who answered: the kit's fast path or the SDK.
   */
  handle(
    req: IncomingMessage,
    res: ServerResponse,
    caller: CallerInfo,
    body: unknown,
  ): Promise<'fast' | 'sdk'>;
  close(): Promise<void>;
}

export interface McpEndpointOptions {
  name: string;
  version: string;
  instructions?: string;
  tools: readonly AnyTool[];
  log: Logger;
  /** Told about degraded calls (the 24-hour monitors). */
  monitors?: ToolMonitors;
  /** false: the SDK answers every request (the fast path's test compares the two); default true. */
  fastPath?: boolean;
}

/**
 * `tools/list` cache hint for 2026-07-28 clients. The list is the same on every replica and for every caller
 * of this server, but the gateway may narrow it per caller (its tool policy), so only the caller's own client
 * may cache it: `private`, five minutes.
 */
export const TOOLS_LIST_CACHE: Readonly<Required<CacheHint>> = { ttlMs: 300_000, cacheScope: 'private' };

export function createMcpEndpoint(opts: McpEndpointOptions): McpEndpoint {
  const { log } = opts;
  const handler = createMcpHandler(
    () => {
      const server = new McpServer(
        { name: `platform-${opts.name}`, version: opts.version },
        { instructions: opts.instructions, cacheHints: { 'tools/list': TOOLS_LIST_CACHE } },
      );
      registerTools(server, opts.tools, log, opts.monitors);
      return server;
    },
    {
      legacy: 'stateless',
      onerror: (err) => log.warn({ err: { message: err.message } }, 'MCP request refused by the SDK'),
    },
  );
  const node = toNodeHandler(handler, {
    onerror: (err) => log.error({ err }, 'MCP handler failed'),
  });

  const fast =
    opts.fastPath === false
      ? undefined
      : createFastPath({ tools: opts.tools, log, monitors: opts.monitors, sdk: (r) => handler.fetch(r) });

  return {
    async handle(req, res, caller, body) {
      if (fast && (await fast.serve(req, res, caller, body))) return 'fast';
      await node(Object.assign(req, { auth: callerAuthInfo(caller) }), res, body);
      return 'sdk';
    },
    close: () => handler.close(),
  };
}
