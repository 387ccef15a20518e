import { HeaderMismatchError } from '../errors.ts';
import type { InboundHeaders } from './headers.ts';

// MCP 2026-07-28 mirrors the JSON-RPC method (and the tool, prompt or resource it names) into the `Mcp-Method`
// and `Mcp-Name` request headers, so that intermediaries can decide on them without reading the body. Whoever
// decides on the headers must make sure the body says the same, or a request routed or allowed as one thing
// would run as another: a POST carrying `Mcp-Method` is refused (400, JSON-RPC −32020 HeaderMismatch) when its
// body disagrees. Requests of earlier revisions carry no such headers and are read from the body.

/** The body field `Mcp-Name` mirrors, per method. */
const NAMED: Readonly<Record<string, 'name' | 'uri'>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
};

const BASE64_SENTINEL = /^=\?base64\?(.*)\?=$/s;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A header value as the client meant it: `=?base64?…?=` is the encoding for values unsafe in a header. */
export function decodeHeaderValue(value: string): string | undefined {
  const m = BASE64_SENTINEL.exec(value);
  if (!m) return value;
  if (!BASE64.test(m[1]!)) return undefined;
  const bytes = Buffer.from(m[1]!, 'base64');
  // Buffer.from ignores bad padding and stray characters; a value that does not round-trip is malformed.
  if (bytes.toString('base64').replace(/=+$/, '') !== m[1]!.replace(/=+$/, '')) return undefined;
  const text = bytes.toString('utf8');
  return Buffer.from(text, 'utf8').equals(bytes) ? text : undefined;
}

interface RpcMessage {
  id?: unknown;
  method?: unknown;
  params?: Record<string, unknown>;
}

/**
 * Throws HeaderMismatchError unless the body agrees with `Mcp-Method` / `Mcp-Name`. Only for a POST that
 * carries `Mcp-Method`: everything else costs nothing here. A body that is not JSON is left to the tool server
 * (it answers a parse error and runs nothing).
 */
export function checkMcpHeaders(h: Pick<InboundHeaders, 'mcpMethod' | 'mcpName'>, body: Buffer | null): void {
  const method = h.mcpMethod;
  if (method === undefined) return;
  let msg: RpcMessage;
  try {
    msg = JSON.parse(body === null ? '' : body.toString('utf8')) as RpcMessage;
  } catch {
    return;
  }
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
    throw new HeaderMismatchError(null, 'Header mismatch: the body is not a single JSON-RPC message');
  }
  const id = typeof msg.id === 'string' || typeof msg.id === 'number' ? msg.id : null;
  if (msg.method !== method) {
    throw new HeaderMismatchError(
      id,
      `Header mismatch: Mcp-Method header value '${method}' does not match body value '${String(msg.method)}'`,
    );
  }
  const field = NAMED[method];
  if (field === undefined) return;
  const bodyValue = msg.params?.[field];
  if (h.mcpName === undefined) {
    throw new HeaderMismatchError(id, `Header mismatch: Mcp-Name header is required for ${method}`);
  }
  const name = decodeHeaderValue(h.mcpName);
  if (name === undefined) {
    throw new HeaderMismatchError(id, 'Header mismatch: Mcp-Name header carries an invalid Base64 value');
  }
  if (name !== bodyValue) {
    throw new HeaderMismatchError(
      id,
      `Header mismatch: Mcp-Name header value '${name}' does not match body value '${String(bodyValue)}'`,
    );
  }
}
