// The floor of the gateway's architecture: a node:http server relaying every request to the benchmark's upstream
// through undici `Pool.dispatch`, with nothing else — no bearer, no revocation, no routing or guards, no policy,
// no identity headers. Measured beside the gateway as a baseline build:
//
//   BENCH_GATEWAY_BASELINE=bench/gateway/bare-forwarder.ts make bench-gateway
//
// It is started as `<script> gateway` with the gateway's environment (GATEWAY_PORT, BENCH_MCP_UPSTREAM) and prints
// the gateway's ready line. docs/performance.md § Fourth confirmation reads the difference as the gateway's job.
import { createServer } from 'node:http';
import { type Dispatcher, Pool } from 'undici';
import { processEnv } from '../../cli/config.ts';
import { loadBareForwarderConfig } from '../config.ts';

const { port, upstream } = loadBareForwarderConfig(processEnv());
const pool = new Pool(upstream.origin, { bodyTimeout: 0 });
const path = `${upstream.pathname.replace(/\/$/, '')}/mcp`;

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    const headers = ['content-type', 'application/json', 'accept', 'application/json, text/event-stream'];
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: () => {},
      onResponseStart: (_c, status, h) => {
        res.writeHead(status, [
          'content-type',
          String(h['content-type']),
          'content-length',
          String(h['content-length']),
        ]);
      },
      onResponseData: (_c, chunk) => void res.write(chunk),
      onResponseEnd: () => void res.end(),
      onResponseError: () => {
        res.statusCode = 502;
        res.end();
      },
    };
    pool.dispatch({ path, method: 'POST', headers, body }, handler);
  });
});
// A clean exit on the benchmark's SIGTERM, so that --cpu-prof (BENCH_GATEWAY_NODE_OPTIONS) writes its profile.
process.on('SIGTERM', () => process.exit(0));
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ msg: 'gateway listening' })}\n`);
});
