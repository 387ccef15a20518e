import type { IncomingHttpHeaders } from 'node:http';

// Header handling for both directions, done from the raw header list in one pass: touching `req.headers`
// would make Node build a second, lower-cased copy of every header on every request.

/** What the gateway itself needs from a request, plus the headers to send upstream. */
export interface InboundHeaders {
  host: string | undefined;
  authorization: string | undefined;
  /** The `DPoP` proof (RFC 9449 §4); never forwarded. */
  dpop: string | undefined;
  /** More than one `DPoP` header: refused (RFC 9449 §4.3 check 1). */
  dpopRepeated: boolean;
  origin: string | undefined;
  requestId: string | undefined;
  contentLength: string | undefined;
  chunked: boolean;
  /** MCP 2026-07-28 request headers (forwarded as they are; checked against the body by proxy/mcp-headers.ts). */
  mcpMethod: string | undefined;
  mcpName: string | undefined;
  /** Flat `[name, value, …]` list for the upstream, hop-by-hop and gateway-owned headers removed. */
  forward: string[];
}

// Never forwarded. Hop-by-hop headers (RFC 9110 §7.6.1) belong to each connection; `authorization` and
// `cookie` are credentials the tool server must not see (it trusts the signed identity instead; a `DPoP` proof,
// for the gateway alone, is skipped in the scan below); `x-request-id`
// is replaced by ours; `x-forwarded-for` from a client is unverifiable (and the gateway adds none: tool servers
// identify callers by the signed identity, and every header costs on the hot path); every `x-platform-*` is
// dropped below so a client cannot forge identity.
const DROP_REQUEST = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'host',
  'authorization',
  'cookie',
  'x-request-id',
  'x-forwarded-for',
]);

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function scanRequestHeaders(raw: readonly string[]): InboundHeaders {
  const out: InboundHeaders = {
    host: undefined,
    authorization: undefined,
    dpop: undefined,
    dpopRepeated: false,
    origin: undefined,
    requestId: undefined,
    contentLength: undefined,
    chunked: false,
    mcpMethod: undefined,
    mcpName: undefined,
    forward: [],
  };
  let connectionTokens: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    // Node keeps only the first of these when repeated; so do we.
    switch (name) {
      case 'host':
        out.host ??= value;
        continue;
      case 'authorization':
        out.authorization ??= value;
        continue;
      case 'dpop':
        if (out.dpop !== undefined) out.dpopRepeated = true;
        out.dpop ??= value;
        continue;
      case 'origin':
        out.origin ??= value;
        break;
      case 'x-request-id':
        // Accept a caller's id only when it is short and plain, so it cannot inject into logs or headers
        // (the rule of lib/http.ts requestId, applied to the raw list).
        if (out.requestId === undefined && REQUEST_ID.test(value)) out.requestId = value;
        continue;
      case 'content-length':
        out.contentLength ??= value;
        break;
      case 'transfer-encoding':
        out.chunked = true;
        continue;
      case 'mcp-method':
        // A repeated header could name two methods: keep the first, and the body check holds the first to it.
        out.mcpMethod ??= value;
        break;
      case 'mcp-name':
        out.mcpName ??= value;
        break;
      case 'connection':
        connectionTokens = connectionTokens === undefined ? value : `${connectionTokens},${value}`;
        continue;
    }
    if (DROP_REQUEST.has(name) || name.startsWith('x-platform-')) continue;
    out.forward.push(name, value);
  }
  if (connectionTokens !== undefined) dropConnectionListed(out.forward, connectionTokens);
  return out;
}

/** Headers a `Connection` header names are hop-by-hop too (RFC 9110 §7.6.1). */
function dropConnectionListed(forward: string[], tokens: string): void {
  const named = new Set<string>();
  for (const t of tokens.split(',')) {
    const n = t.trim().toLowerCase();
    if (n !== '' && n !== 'keep-alive' && n !== 'close') named.add(n);
  }
  if (named.size === 0) return;
  for (let i = forward.length - 2; i >= 0; i -= 2) {
    if (named.has(forward[i]!)) forward.splice(i, 2);
  }
}

const DROP_RESPONSE = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'trailer',
  'x-request-id',
]);

/**
 * The upstream's response headers as a flat list for `res.writeHead`, hop-by-hop ones removed and our request
 * id added. Nothing else is added: connector probes reject framework headers they do not expect.
 */
export function responseHeaders(headers: IncomingHttpHeaders, requestId: string): string[] {
  const out: string[] = [];
  for (const name in headers) {
    if (DROP_RESPONSE.has(name)) continue;
    const v = headers[name];
    if (v === undefined) continue;
    if (typeof v === 'string') out.push(name, v);
    else for (const item of v) out.push(name, item);
  }
  out.push('x-request-id', requestId);
  return out;
}
