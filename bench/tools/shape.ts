// The fixed shape of `make bench-tools`: an MCP 2026-07-28 `tools/call whoami`, as the SDK v2 client sends it.
export const SERVICE = 'platform';
export const AUDIENCE = 'https://platform.bench/api';
export const PROTOCOL_VERSION = '2026-07-28';

export const REQUEST_BODY = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: {
    name: 'whoami',
    arguments: {},
    _meta: {
      'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
      'io.modelcontextprotocol/clientInfo': { name: 'bench-tools', version: '1.0.0' },
      'io.modelcontextprotocol/clientCapabilities': {},
    },
  },
});

/** The MCP headers every request carries, besides its own identity (bearer or signed headers). */
export const MCP_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': PROTOCOL_VERSION,
  'mcp-method': 'tools/call',
  'mcp-name': 'whoami',
};

export interface LoadSpec {
  url: string;
  /** File holding a JSON array of raw HTTP/1.1 requests (base64), sent in turn on each connection. */
  requestsFile: string;
  connections: number;
  duration: number;
}

export type { LoadResult } from '../lib/latencies.ts';

/** One raw HTTP/1.1 request. */
export function rawRequest(
  host: string,
  path: string,
  headers: Record<string, string>,
  body: string,
): string {
  const b = Buffer.from(body);
  let head = `POST ${path} HTTP/1.1\r\nHost: ${host}\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  head += `Content-Length: ${b.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), b]).toString('base64');
}
