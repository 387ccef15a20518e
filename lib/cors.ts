import type { IncomingMessage, ServerResponse } from 'node:http';

// CORS for the endpoints browsers call directly (the MCP Inspector, web clients): any origin, never with
// credentials (no cookie is read there; `Access-Control-Allow-Origin: *` forbids them anyway).

const ALLOW_HEADERS = 'authorization, content-type, dpop, mcp-protocol-version';

/** Sets the CORS headers of an actual (non-preflight) response. */
export function allowAnyOrigin(res: ServerResponse, exposeHeaders?: string): void {
  res.setHeader('access-control-allow-origin', '*');
  if (exposeHeaders) res.setHeader('access-control-expose-headers', exposeHeaders);
}

/** Answers a CORS preflight (OPTIONS with Access-Control-Request-Method) with 204; false when it is not one. */
export function answerPreflight(
  req: IncomingMessage,
  res: ServerResponse,
  methods: readonly string[],
): boolean {
  if (req.method !== 'OPTIONS' || !req.headers['access-control-request-method']) return false;
  res.writeHead(204, {
    'access-control-allow-origin': '*',
    'access-control-allow-methods': [...methods, 'OPTIONS'].join(', '),
    'access-control-allow-headers': ALLOW_HEADERS,
    'access-control-max-age': '600',
    'content-length': 0,
  });
  res.end();
  return true;
}
