import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ServerSpan, SpanAttributes, TraceParent, Tracing } from './index.ts';
import { scanMcpRequest } from './mcp-scan.ts';

// One inbound request's span, made when it is first needed: its parent may only be known once the body is read
// (MCP's `params._meta.traceparent` when the request has no `traceparent` header), so the span is started then,
// back-dated to the request's arrival. The request and its response carry it (`traceOf`), so the one error edge
// of each server can mark it failed without threading it through every handler.

const TRACE = Symbol('platform.trace');
type Carrier = (IncomingMessage | ServerResponse) & { [TRACE]?: RequestTrace };

/** Longest attribute value taken from a request (a tool name, a JSON-RPC id, a route). */
const MAX_VALUE = 128;

export class RequestTrace {
  readonly #tracing: Tracing;
  readonly #start = Date.now();
  #parent: TraceParent;
  #name: string;
  readonly #attributes: Record<string, string | number | boolean | undefined> = {};
  #errorType: string | undefined;
  #span: ServerSpan | undefined;
  #ended = false;

  constructor(
    tracing: Tracing,
    req: IncomingMessage,
    res: ServerResponse,
    name: string,
    attributes: SpanAttributes,
  ) {
    this.#tracing = tracing;
    this.#name = name;
    const traceparent = req.headers.traceparent;
    const tracestate = req.headers.tracestate;
    this.#parent = {
      traceparent: typeof traceparent === 'string' ? traceparent : undefined,
      tracestate: typeof tracestate === 'string' ? tracestate : undefined,
    };
    Object.assign(this.#attributes, attributes);
    (req as Carrier)[TRACE] = this;
    (res as Carrier)[TRACE] = this;
    res.on('close', endOnClose);
  }

  /** A parent from the request body (MCP `_meta`), used only when the request had no traceparent header. */
  continueFrom(parent: TraceParent | undefined): void {
    if (this.#span !== undefined || this.#parent.traceparent !== undefined) return;
    if (parent?.traceparent !== undefined) this.#parent = parent;
  }

  rename(name: string): void {
    this.#name = name;
    this.#span?.setName(name);
  }

  set(attributes: SpanAttributes): void {
    const bounded: Record<string, string | number | boolean> = {};
    for (const k in attributes) {
      const v = attributes[k];
      if (v !== undefined) bounded[k] = typeof v === 'string' ? v.slice(0, MAX_VALUE) : v;
    }
    Object.assign(this.#attributes, bounded);
    this.#span?.set(bounded);
  }

  /** The refusal's stable reason (`error.type`); the first one named counts. */
  fail(errorType: string): void {
    this.#errorType ??= errorType.slice(0, MAX_VALUE);
  }

  /** The span's context for the next hop (starts the span if it has not started). */
  propagation(): { traceparent: string; tracestate?: string } {
    return this.#started().propagation();
  }

  end(status: number): void {
    if (this.#ended) return;
    this.#ended = true;
    const span = this.#started();
    span.set({ 'http.response.status_code': status });
    if (this.#errorType !== undefined) span.fail(this.#errorType);
    else if (status >= 500) span.fail(String(status));
    span.end();
  }

  #started(): ServerSpan {
    this.#span ??= this.#tracing.startServerSpan(this.#name, {
      parent: this.#parent,
      startTime: this.#start,
      attributes: this.#attributes,
    });
    return this.#span;
  }
}

// One shared listener, not a closure per request: the response finds its trace ('close' comes once).
function endOnClose(this: ServerResponse): void {
  (this as Carrier)[TRACE]?.end(this.statusCode);
}

/** The trace of the request or response, when tracing is on. */
export function traceOf(r: IncomingMessage | ServerResponse): RequestTrace | undefined {
  return (r as Carrier)[TRACE];
}

/** What MCP's conventions name on a span, read from a JSON-RPC request body (the first message of a batch). */
export interface McpRequestInfo {
  method: string | undefined;
  tool: string | undefined;
  id: string | undefined;
  meta: TraceParent | undefined;
}

const NONE: McpRequestInfo = { method: undefined, tool: undefined, id: undefined, meta: undefined };

/**
 * From the raw body (scanned here, lib/telemetry/mcp-scan.ts: only ever called with tracing on, so the untraced
 * path reads nothing) or from the message already parsed (the tool servers').
 */
export function mcpRequestInfo(body: unknown): McpRequestInfo {
  if (body === null || body === undefined) return NONE;
  if (Buffer.isBuffer(body)) {
    // The gateway's case: nothing of the message is built, only the fields a span names are read.
    if (body.length === 0) return NONE;
    const s = scanMcpRequest(body);
    if (s?.method === undefined) return NONE;
    return {
      method: s.method,
      tool: s.method === 'tools/call' ? s.name : undefined,
      id: s.id,
      meta:
        s.traceparent !== undefined ? { traceparent: s.traceparent, tracestate: s.tracestate } : undefined,
    };
  }
  let msg: unknown = body;
  if (typeof body === 'string') {
    if (body.length === 0) return NONE;
    try {
      msg = JSON.parse(body);
    } catch {
      return NONE;
    }
  }
  if (Array.isArray(msg)) msg = msg[0];
  if (msg === null || typeof msg !== 'object') return NONE;
  const { method, params, id } = msg as { method?: unknown; params?: unknown; id?: unknown };
  if (typeof method !== 'string') return NONE;
  const p = params !== null && typeof params === 'object' ? (params as Record<string, unknown>) : {};
  const meta = p._meta !== null && typeof p._meta === 'object' ? (p._meta as Record<string, unknown>) : {};
  return {
    method,
    tool: method === 'tools/call' && typeof p.name === 'string' ? p.name : undefined,
    id: typeof id === 'string' || typeof id === 'number' ? String(id) : undefined,
    meta:
      typeof meta.traceparent === 'string'
        ? {
            traceparent: meta.traceparent,
            tracestate: typeof meta.tracestate === 'string' ? meta.tracestate : undefined,
          }
        : undefined,
  };
}

const PROTOCOL_VERSION = /^\d{4}-\d{2}-\d{2}$/;

/**
 * Names the span of an MCP request by the OpenTelemetry MCP conventions (`{mcp.method.name} {target}`, the
 * target being the tool) and sets their attributes.
 */
export function traceMcp(trace: RequestTrace, info: McpRequestInfo, protocolVersion: unknown): void {
  trace.continueFrom(info.meta);
  if (info.method === undefined) return;
  trace.rename(info.tool === undefined ? info.method : `${info.method} ${info.tool}`);
  trace.set({
    'mcp.method.name': info.method,
    'gen_ai.tool.name': info.tool,
    'gen_ai.operation.name': info.method === 'tools/call' ? 'execute_tool' : undefined,
    'jsonrpc.request.id': info.id,
    'mcp.protocol.version':
      typeof protocolVersion === 'string' && PROTOCOL_VERSION.test(protocolVersion)
        ? protocolVersion
        : undefined,
  });
}
