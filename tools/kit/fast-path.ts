import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  classifyInboundRequest,
  isJsonContentType,
  PROTOCOL_VERSION_META_KEY,
} from '@modelcontextprotocol/server';
import type { Logger } from '../../lib/logger.ts';
import type { ToolMonitors } from './monitors.ts';
import { type AnyTool, type CallerInfo, runTool } from './tool.ts';

// The kit's fast path for the two requests a modern connector sends over and over: a stateless MCP 2026-07-28
// `tools/call` or `tools/list`, one JSON-RPC request per POST, answered as JSON. The SDK serves such a request
// by building an McpServer (with every tool registered, and its schemas converted) and a transport for it, then
// running its validation ladder and codecs; here the same answer comes from what is computed once per process.
//
// It answers only what it can answer exactly as the SDK would, and leaves everything else untouched for the SDK:
// `initialize` and every 2025-era request, batches, notifications, GET/DELETE, other methods, any request whose
// headers and body the SDK would refuse or check further (protocol version, Mcp-Method, Mcp-Name, the _meta
// envelope), `_meta` keys beyond the envelope's (progress tokens, log level), pagination cursors, task or
// requestState parameters, unknown tools and arguments the tool's schema refuses (the SDK answers those with its
// own JSON-RPC error or `isError` result). test/tools/fast-path.test.ts holds its answers to the SDK's, byte
// for byte. The host guard, the identity check and provisioning ran before either path (app.ts).

/** The revision the fast path answers; every other revision goes to the SDK. */
export const FAST_PATH_REVISION = '2026-07-28';

/** The keys of a 2026-07-28 request envelope (`params._meta`); any other `_meta` key goes to the SDK. */
const ENVELOPE_KEYS: ReadonlySet<string> = new Set([
  PROTOCOL_VERSION_META_KEY,
  CLIENT_INFO_META_KEY,
  CLIENT_CAPABILITIES_META_KEY,
]);

/** Answers a request given as a web Request, as the SDK's handler does (`createMcpHandler(…).fetch`). */
export type SdkFetch = (request: Request) => Promise<Response>;

export interface FastPathOptions {
  tools: readonly AnyTool[];
  log: Logger;
  monitors?: ToolMonitors;
  /** The SDK handler the fast path stands in for: asked once for the tool list it answers with. */
  sdk: SdkFetch;
}

export interface FastPath {
  /**
   * Answers `body` and resolves true, or resolves false having written nothing, and the SDK serves the request.
   * `caller` passed the kit's identity and provisioning steps.
   */
  serve(req: IncomingMessage, res: ServerResponse, caller: CallerInfo, body: unknown): Promise<boolean>;
}

type Json = Record<string, unknown>;
type RequestId = string | number;

/** What the fast path answers with, learnt once from the SDK itself. */
interface Answers {
  /** The SDK's `tools/list` response body around its id: prefix + JSON id + suffix. */
  list: { prefix: string; suffix: string };
  /** The `_meta` the SDK adds to every 2026-07-28 result (the server's name and version). */
  resultMeta: unknown;
  /** Tools the fast path calls: all of them, less any that declares `x-mcp-header` parameters. */
  tools: ReadonlyMap<string, AnyTool>;
}

function isPlainObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function onlyKeys(o: Json, allowed: (k: string) => boolean): boolean {
  for (const k in o) if (!allowed(k)) return false;
  return true;
}

/** A request the fast path serves, or undefined for the SDK. */
type Eligible =
  | { method: 'tools/list'; id: RequestId }
  | { method: 'tools/call'; id: RequestId; name: string; args: Json };

/** Most envelopes whose verdict is remembered; the memo starts afresh when full. */
const ENVELOPE_MEMO_SIZE = 1024;

/**
 * The strict shape the fast path serves; anything else (even when the SDK would serve it) is left to the SDK.
 * The SDK's own classifier then confirms: a modern request for 2026-07-28 with a valid envelope. Past the strict
 * checks its verdict depends only on the method and the `_meta` envelope (a connector sends the same one on every
 * request), so it is asked once per distinct envelope and the verdicts it accepted are remembered.
 */
export function createEligibility(): (req: IncomingMessage, body: unknown) => Eligible | undefined {
  const accepted = new Set<string>();
  return (req, body) => {
    if (req.method !== 'POST' || !isPlainObject(body)) return undefined;
    const h = req.headers;
    if (!isJsonContentType(h['content-type']) || !h.accept?.includes('application/json')) return undefined;
    const version = h['mcp-protocol-version'];
    const methodHeader = h['mcp-method'];
    const nameHeader = h['mcp-name'];
    if (version !== FAST_PATH_REVISION || body.jsonrpc !== '2.0') return undefined;
    const { id, method, params } = body;
    if (typeof id !== 'string' && !(typeof id === 'number' && Number.isSafeInteger(id))) return undefined;
    if ((method !== 'tools/list' && method !== 'tools/call') || methodHeader !== method) return undefined;
    if (!onlyKeys(body, (k) => k === 'jsonrpc' || k === 'id' || k === 'method' || k === 'params')) {
      return undefined;
    }
    if (!isPlainObject(params)) return undefined;
    const meta = params._meta;
    if (!isPlainObject(meta) || meta[PROTOCOL_VERSION_META_KEY] !== FAST_PATH_REVISION) return undefined;
    if (!onlyKeys(meta, (k) => ENVELOPE_KEYS.has(k))) return undefined;
    let found: Eligible;
    if (method === 'tools/list') {
      if (nameHeader !== undefined || !onlyKeys(params, (k) => k === '_meta')) return undefined;
      found = { method, id };
    } else {
      const { name, arguments: args } = params;
      if (typeof name !== 'string' || nameHeader !== name) return undefined;
      if (args !== undefined && !isPlainObject(args)) return undefined;
      if (!onlyKeys(params, (k) => k === 'name' || k === 'arguments' || k === '_meta')) return undefined;
      found = { method, id, name, args: args ?? {} };
    }
    const memoKey = `${method} ${JSON.stringify(meta)}`;
    if (accepted.has(memoKey)) return found;
    // The SDK's own first rung (JSON-RPC shape, envelope contents, header/body agreement): the code it runs.
    const route = classifyInboundRequest({
      httpMethod: 'POST',
      protocolVersionHeader: version,
      mcpMethodHeader: methodHeader,
      ...(nameHeader !== undefined && { mcpNameHeader: nameHeader }),
      body,
    });
    if (
      route.kind !== 'modern' ||
      route.messageKind !== 'request' ||
      route.classification.revision !== FAST_PATH_REVISION
    ) {
      return undefined;
    }
    if (accepted.size >= ENVELOPE_MEMO_SIZE) accepted.clear();
    accepted.add(memoKey);
    return found;
  };
}

/** A `tools/list` for the SDK to answer once, with an id to cut its answer around. */
async function learnAnswers(opts: FastPathOptions): Promise<Answers | undefined> {
  const sentinel = `fast-path-${crypto.randomUUID()}`;
  const response = await opts.sdk(
    new Request('http://fast-path.invalid/mcp', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': FAST_PATH_REVISION,
        'mcp-method': 'tools/list',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: sentinel,
        method: 'tools/list',
        params: {
          _meta: {
            [PROTOCOL_VERSION_META_KEY]: FAST_PATH_REVISION,
            [CLIENT_INFO_META_KEY]: { name: 'platform-fast-path', version: '1.0.0' },
            [CLIENT_CAPABILITIES_META_KEY]: {},
          },
        },
      }),
    }),
  );
  const text = await response.text();
  const parts = text.split(JSON.stringify(sentinel));
  if (
    response.status !== 200 ||
    response.headers.get('content-type') !== 'application/json' ||
    parts.length !== 2
  ) {
    opts.log.warn({ status: response.status }, 'MCP fast path off: the SDK did not list the tools');
    return undefined;
  }
  const result = (JSON.parse(text) as { result?: { tools?: Json[]; _meta?: unknown } }).result;
  const listed = result?.tools ?? [];
  const tools = new Map<string, AnyTool>();
  for (const tool of opts.tools) {
    const schema = listed.find((t) => t.name === tool.name)?.inputSchema;
    // Mcp-Param-* headers are checked by the SDK against such declarations: those tools stay with the SDK.
    if (schema !== undefined && !JSON.stringify(schema).includes('"x-mcp-header"'))
      tools.set(tool.name, tool);
  }
  return { list: { prefix: parts[0]!, suffix: parts[1]! }, resultMeta: result?._meta, tools };
}

/** The SDK's wording of a schema issue (validateStandardSchema in @modelcontextprotocol/server). */
function formatIssue(issue: { message: string; path?: ReadonlyArray<PropertyKey | { key: PropertyKey }> }) {
  if (!issue.path?.length) return issue.message;
  return `${issue.path.map((p) => String(typeof p === 'object' ? p.key : p)).join('.')}: ${issue.message}`;
}

/** The SDK's check of a successful result against the tool's output schema (McpServer.validateToolOutput). */
async function checkOutput(tool: AnyTool, result: CallToolResult): Promise<CallToolResult> {
  if (result.isError) return result;
  let problem: string | undefined;
  if (result.structuredContent === undefined) {
    problem = `Output validation error: Tool ${tool.name} has an output schema but no structured content was provided`;
  } else {
    const checked = await tool.output['~standard'].validate(result.structuredContent);
    if (checked.issues && checked.issues.length > 0) {
      problem = `Output validation error: Invalid structured content for tool ${tool.name}: ${checked.issues.map(formatIssue).join(', ')}`;
    }
  }
  return problem === undefined ? result : { content: [{ type: 'text', text: problem }], isError: true };
}

function send(res: ServerResponse, payload: string): void {
  // As the SDK's node adapter writes it: the same status and content-type, chunked.
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(payload);
}

export function createFastPath(opts: FastPathOptions): FastPath {
  const eligible = createEligibility();
  let answers: Promise<Answers | undefined> | undefined;
  const learn = () => {
    answers ??= learnAnswers(opts).catch((err: unknown) => {
      opts.log.warn({ err: { message: (err as Error).message } }, 'MCP fast path off');
      return undefined;
    });
    return answers;
  };

  return {
    async serve(req, res, caller, body) {
      const request = eligible(req, body);
      if (!request) return false;
      const known = await learn();
      if (!known) return false;
      const id = JSON.stringify(request.id);
      if (request.method === 'tools/list') {
        send(res, known.list.prefix + id + known.list.suffix);
        return true;
      }
      const tool = known.tools.get(request.name);
      if (!tool) return false;
      let args: unknown;
      try {
        const parsed = tool.input.safeParse(request.args);
        // The SDK words a refusal itself (an `isError` result); nothing has run yet, so it may answer.
        if (!parsed.success) return false;
        args = parsed.data;
      } catch {
        return false; // an async schema: the SDK's validation awaits it
      }
      // The call's signal aborts when the client goes away before the answer is written. Made only when the
      // tool reads it (an AbortController per call was a visible share of a call's CPU); made after the client
      // left, it is made aborted.
      let aborted: AbortController | undefined;
      let gone = false;
      const onClose = () => {
        if (res.writableFinished) return;
        gone = true;
        aborted?.abort();
      };
      const signal = () => {
        if (aborted === undefined) {
          aborted = new AbortController();
          if (gone) aborted.abort();
        }
        return aborted.signal;
      };
      res.once('close', onClose);
      const result = await checkOutput(
        tool,
        await runTool(tool, args, caller, signal, opts.log, opts.monitors),
      );
      res.off('close', onClose);
      // The result as the SDK's 2026-07-28 codec writes it: its keys in the wire schema's order, then the
      // result type and the server's _meta; the JSON-RPC envelope after the result, as the SDK orders it.
      const wire = result.isError
        ? { content: result.content, isError: true, resultType: 'complete', _meta: known.resultMeta }
        : {
            content: result.content,
            structuredContent: result.structuredContent,
            resultType: 'complete',
            _meta: known.resultMeta,
          };
      send(res, `{"result":${JSON.stringify(wire)},"jsonrpc":"2.0","id":${id}}`);
      return true;
    },
  };
}
