// The reference of `make bench-tools`' CPU ratio: a plain node:http JSON handler doing the least any JSON-RPC
// server must do for the same request — read the POST body, JSON.parse it — and answering with a fixed JSON-RPC
// result: the tool server's own answer to the same request (its bytes, given as argv[2]), written with the same
// headers in the same way (x-request-id, content-type, chunked as the tool server writes it). No MCP, no identity
// check, no database, no log line. Prints {"port":…} once it listens.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const answer = process.argv[2];
if (!answer) throw new Error('usage: plain-handler.ts <answer body>');

const http = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    JSON.parse(Buffer.concat(chunks).toString('utf8'));
    res.setHeader('x-request-id', randomUUID());
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(answer);
  });
});
http.keepAliveTimeout = 65_000;
http.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (http.address() as AddressInfo).port })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
