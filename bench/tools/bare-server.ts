// The floor of `make bench-tools`: a bare MCP SDK v2 server answering the same `whoami` tool the same way our
// platform tool server does (createMcpHandler, a fresh McpServer per request, the same schemas and a structured
// result), with no database and no identity check. Prints {"port":…} once it listens.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';

const output = z.object({
  email: z.string(),
  sub: z.string(),
  issuer: z.enum(['platform', 'entra', 'service']),
  scope: z.string(),
  client_id: z.string(),
});
const caller = {
  email: 'bench@example.com',
  sub: 'bench-sub',
  issuer: 'platform' as const,
  scope: 'openid email mcp:platform',
  client_id: 'platform-cli',
};

const handler = createMcpHandler(() => {
  const server = new McpServer({ name: 'bare', version: '1.0.0' });
  server.registerTool(
    'whoami',
    {
      title: 'Who am I',
      description: 'Returns the caller.',
      inputSchema: z.object({}),
      outputSchema: output,
    },
    async () => ({ content: [{ type: 'text', text: JSON.stringify(caller) }], structuredContent: caller }),
  );
  return server;
});
const node = toNodeHandler(handler);
const http = createServer((req, res) => void node(req, res));
http.keepAliveTimeout = 65_000;
http.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (http.address() as AddressInfo).port })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
