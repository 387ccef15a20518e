import { randomUUID } from 'node:crypto';
import { type ConnectionRequiredError, URL_ELICITATION_REQUIRED_CODE } from '../errors.ts';

// MCP URL elicitation (MCP 2025-11-25, SEP-1036): a server that needs the user to authorise access to a third
// party out of band answers the request with the JSON-RPC error −32042 whose `data.elicitations` hold the URL to
// open; the client shows it, the user completes the flow in a browser, and the client retries. The gateway
// answers so for every MCP request to a service whose connection the user has not made, whatever the protocol
// revision the request names: a client that does not know the code still shows the message, which names the URL.

type RpcId = string | number;

interface RpcMessage {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
}

/** The ids of the JSON-RPC requests in a body (a notification or a response has none to answer). */
function requestIds(body: Buffer | null): { ids: RpcId[]; batch: boolean } | undefined {
  if (body === null || body.length === 0) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  const batch = Array.isArray(parsed);
  const ids: RpcId[] = [];
  for (const m of (batch ? parsed : [parsed]) as unknown[]) {
    if (m === null || typeof m !== 'object') continue;
    const { jsonrpc, id, method } = m as RpcMessage;
    if (jsonrpc !== '2.0' || typeof method !== 'string') continue;
    if (typeof id === 'string' || typeof id === 'number') ids.push(id);
  }
  return ids.length === 0 ? undefined : { ids, batch };
}

/**
 * The HTTP 200 JSON-RPC body answering an MCP request with −32042 for `err`'s connection; undefined when the body
 * holds no JSON-RPC request (then the 403 CONNECTION_REQUIRED body answers).
 */
export function elicitationAnswer(err: ConnectionRequiredError, body: Buffer | null): string | undefined {
  const found = requestIds(body);
  if (found === undefined) return undefined;
  const error = (id: RpcId) => ({
    jsonrpc: '2.0',
    id,
    error: {
      code: URL_ELICITATION_REQUIRED_CODE,
      message: err.message,
      data: {
        elicitations: [
          {
            mode: 'url',
            elicitationId: randomUUID(),
            url: err.connectUri,
            message: `Connect your ${err.connection} account, so that this service can act as you there. Open the link, sign in, then try again.`,
          },
        ],
      },
    },
  });
  return JSON.stringify(found.batch ? found.ids.map(error) : error(found.ids[0]!));
}
