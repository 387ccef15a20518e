import type {
  AuthInfo,
  CallToolResult,
  McpServer,
  ServerContext,
  ToolAnnotations,
} from '@modelcontextprotocol/server';
import type { z } from 'zod';
import type { Identity } from '../../lib/identity.ts';
import { flatLines, type Logger, lazyChild } from '../../lib/logger.ts';
import type { ToolMonitors } from './monitors.ts';
import type { Provisioning } from './provisioning.ts';
import { DependencyUnavailableError, toolErrorResult } from './tool-errors.ts';

/** What a tool handler knows about its call: the caller of *this* HTTP request (there are no sessions). */
export interface ToolCall {
  identity: Identity;
  requestId: string;
  log: Logger;
  signal: AbortSignal;
}

export interface ToolSpec<I extends z.ZodObject, O extends z.ZodObject> {
  name: string;
  title: string;
  description: string;
  input: I;
  output: O;
  annotations?: ToolAnnotations;
  run(args: z.output<I>, call: ToolCall): Promise<z.output<O>>;
}

// The registry holds tools of different shapes; `run` is declared as a method so the erased type accepts them.
// biome-ignore lint/suspicious/noExplicitAny: type erasure for a heterogeneous list; each spec is checked by defineTool.
export type AnyTool = ToolSpec<any, any>;

/** Typed at the definition site, erased for the registry. */
export function defineTool<I extends z.ZodObject, O extends z.ZodObject>(spec: ToolSpec<I, O>): AnyTool {
  return spec;
}

/** Per-request caller data the kit puts into the SDK's `authInfo.extra`. */
export interface CallerInfo {
  identity: Identity;
  provisioning: Provisioning;
}

const CALLER_KEY = 'platformCaller';

export function callerAuthInfo(caller: CallerInfo): AuthInfo {
  // There is no bearer at this hop: the gateway validated it and vouches with signed headers instead.
  return {
    token: '',
    clientId: caller.identity.clientId,
    scopes: caller.identity.scope.split(' ').filter(Boolean),
    extra: { [CALLER_KEY]: caller },
  };
}

function callerOf(authInfo: AuthInfo | undefined): CallerInfo {
  const caller = authInfo?.extra?.[CALLER_KEY] as CallerInfo | undefined;
  // Every MCP request passes the kit's identity step first; reaching a tool without it is a bug, not a 401.
  if (!caller) throw new TypeError('tool called without the caller the kit attaches to every request');
  return caller;
}

/**
 * A call's ToolCall: its logger and its abort signal made when the tool first asks for them (whoami asks for
 * neither). A class, not an object literal with getters: V8 builds such a literal slowly on every call.
 */
class Call implements ToolCall {
  readonly identity: Identity;
  readonly requestId: string;
  readonly #log: () => Logger;
  readonly #signal: AbortSignal | (() => AbortSignal);

  constructor(identity: Identity, log: () => Logger, signal: AbortSignal | (() => AbortSignal)) {
    this.identity = identity;
    this.requestId = identity.requestId;
    this.#log = log;
    this.#signal = signal;
  }

  get log(): Logger {
    return this.#log();
  }

  get signal(): AbortSignal {
    return typeof this.#signal === 'function' ? this.#signal() : this.#signal;
  }
}

/**
 * One call of one tool, already validated: the caller check, the run and the error mapping, and the `tool call`
 * log line. Both the SDK's handler (registerTools) and the kit's fast path (fast-path.ts) call tools through it.
 */
export async function runTool(
  tool: AnyTool,
  args: unknown,
  caller: CallerInfo,
  /** The call's abort signal, or a function making it when the tool first reads `call.signal`. */
  signal: AbortSignal | (() => AbortSignal),
  log: Logger,
  monitors?: ToolMonitors,
): Promise<CallToolResult> {
  const { identity, provisioning } = caller;
  const bindings = { reqId: identity.requestId, tool: tool.name, caller: identity.email };
  // The call's logger, for the tool's own lines and its error's: made when one is written (most calls write
  // none; a child's bindings run through the redactor).
  const callLog = lazyChild(log, bindings);
  const started = performance.now();
  let result: CallToolResult;
  try {
    if (provisioning !== 'verified') {
      throw new DependencyUnavailableError(
        'database',
        'the user directory is unavailable, so the caller cannot be verified; nothing was done, retry shortly',
      );
    }
    const out = await tool.run(args, new Call(identity, callLog, signal));
    result = { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
  } catch (err) {
    result = toolErrorResult(err, callLog(), monitors);
  }
  // Flat fields (lib/logger.ts flatLines): the same line the call's child would write, without the redaction pass.
  flatLines(log).info(
    { ...bindings, ms: Math.round(performance.now() - started), ok: !result.isError },
    'tool call',
  );
  return result;
}

/** Registers the tools on one request's server, each wrapped with the caller check and the error mapping. */
export function registerTools(
  server: McpServer,
  tools: readonly AnyTool[],
  log: Logger,
  monitors?: ToolMonitors,
): void {
  for (const tool of tools) {
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: tool.input,
        outputSchema: tool.output,
        annotations: tool.annotations,
      },
      async (args: unknown, ctx: ServerContext): Promise<CallToolResult> =>
        runTool(tool, args, callerOf(ctx.http?.authInfo), ctx.mcpReq.signal, log, monitors),
    );
  }
}
