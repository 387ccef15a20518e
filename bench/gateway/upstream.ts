// The benchmark's upstream: a minimal node:http server answering every request with the fixed JSON-RPC result.
// Run by bench/gateway-proxy.ts (pinned to core 0); prints {"port": …} once it listens.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RESPONSE_BODY } from './shape.ts';

async function runUpstream(): Promise<void> {
  const body = Buffer.from(RESPONSE_BODY);
  const server = createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
  });
}

await runUpstream();
