// What the policy needs to know of a request: its JSON-RPC method(s) and, for tools/call, the tool name.
// Read from the body (the gateway has it whole before deciding); the MCP 2026-07-28 `Mcp-Method`/`Mcp-Name`
// headers are only a copy of it, checked against the body elsewhere, so the body is what decides here.

export interface RpcCall {
  /** undefined: not a JSON-RPC request (a response, a GET stream, a body that is not JSON). */
  method: string | undefined;
  /** The `params.name` of a tools/call. */
  tool: string | undefined;
}

const NO_CALL: readonly RpcCall[] = Object.freeze([Object.freeze({ method: undefined, tool: undefined })]);

/** The calls a request body makes: one for a message, one per message of a (pre-2025-06-18) batch. */
export function rpcCalls(body: Buffer | undefined): readonly RpcCall[] {
  if (body === undefined || body.length === 0) return NO_CALL;
  let msg: unknown;
  try {
    msg = JSON.parse(body.toString('utf8'));
  } catch {
    return NO_CALL;
  }
  if (Array.isArray(msg)) return msg.length === 0 ? NO_CALL : msg.map(callOf);
  return [callOf(msg)];
}

function callOf(msg: unknown): RpcCall {
  if (msg === null || typeof msg !== 'object') return { method: undefined, tool: undefined };
  const { method, params } = msg as { method?: unknown; params?: unknown };
  if (typeof method !== 'string') return { method: undefined, tool: undefined };
  let tool: string | undefined;
  if (method === 'tools/call' && params !== null && typeof params === 'object') {
    const name = (params as { name?: unknown }).name;
    if (typeof name === 'string') tool = name;
  }
  return { method, tool };
}
