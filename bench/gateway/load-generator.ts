// The benchmark's load generator, run by bench/gateway-proxy.ts (pinned to core 1) with a JSON LoadSpec as its
// argument; prints one JSON LoadResult line.
import { connect } from 'node:net';
import { processEnv } from '../../cli/config.ts';
import { loadGatewayBenchConfig } from '../config.ts';
import { Latencies } from '../lib/latencies.ts';
import { type LoadResult, type LoadSpec, REQUEST_BODY, SERVICE } from './shape.ts';

/**
 * The load generator: keep-alive HTTP/1.1 over raw sockets with the 50 requests prebuilt, one request in flight
 * per connection, latency of every response recorded in microseconds. (autocannon records whole milliseconds,
 * which reads as p50 = 0 for a sub-millisecond upstream; a plain client also keeps the generator's own cost
 * low, so "direct" measures the upstream rather than the generator.)
 */
async function runAutocannon(spec: LoadSpec): Promise<void> {
  // autocannon ships no type declarations; the specifier is a variable so the import is typed by the cast below.
  const specifier = 'autocannon';
  const { default: autocannon } = (await import(specifier)) as unknown as {
    default: (opts: Record<string, unknown>) => Promise<{
      requests: { average: number; total: number };
      latency: { p50: number; p99: number };
      non2xx: number;
      errors: number;
      timeouts: number;
    }>;
  };
  // Each connection walks the same list of prebuilt requests, one token each.
  const requests = spec.tokens.map((t) => ({
    method: 'POST',
    path: `/${SERVICE}/mcp`,
    headers: {
      authorization: `Bearer ${t}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: REQUEST_BODY,
  }));
  const r = await autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: spec.duration,
    requests,
  });
  // autocannon's latencies are whole milliseconds.
  const result: LoadResult = {
    requestsPerSecond: r.requests.total / spec.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

async function runLoad(spec: LoadSpec): Promise<void> {
  const target = new URL(spec.url);
  const body = Buffer.from(REQUEST_BODY);
  const requests = spec.tokens.map((t) =>
    Buffer.concat([
      Buffer.from(
        `POST /${SERVICE}/mcp HTTP/1.1\r\nHost: ${target.host}\r\nAuthorization: Bearer ${t}\r\n` +
          'Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n' +
          `Content-Length: ${body.length}\r\n\r\n`,
      ),
      body,
    ]),
  );
  const latencies = new Latencies();
  let non2xx = 0;
  let errors = 0;
  let running = true;
  const started = performance.now();
  const finished: Array<Promise<void>> = [];

  for (let c = 0; c < spec.connections; c++) {
    finished.push(
      new Promise<void>((resolve) => {
        const socket = connect({ host: target.hostname, port: Number(target.port), noDelay: true });
        let next = c;
        let sentAt = 0;
        let buf: Buffer = Buffer.alloc(0);
        const send = () => {
          if (!running) {
            socket.end();
            return;
          }
          sentAt = performance.now();
          socket.write(requests[next % requests.length]!);
          next += 1;
        };
        socket.on('connect', send);
        socket.on('data', (chunk: Buffer) => {
          buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
          for (;;) {
            const end = buf.indexOf('\r\n\r\n');
            if (end < 0) return;
            const head = buf.toString('latin1', 0, end);
            const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
            if (!m) {
              // Every response in this shape has a Content-Length; anything else is counted as an error.
              errors += 1;
              socket.destroy();
              return;
            }
            const total = end + 4 + Number(m[1]);
            if (buf.length < total) return;
            const status = Number(head.slice(9, 12));
            if (status < 200 || status > 299) non2xx += 1;
            latencies.add((performance.now() - sentAt) * 1000);
            buf = buf.subarray(total);
            send();
          }
        });
        socket.on('error', () => {
          errors += 1;
        });
        socket.on('close', () => resolve());
      }),
    );
  }
  await new Promise((r) => setTimeout(r, spec.duration * 1000));
  running = false;
  const elapsed = (performance.now() - started) / 1000;
  await Promise.race([Promise.all(finished), new Promise((r) => setTimeout(r, 2000))]);
  const result = latencies.result(elapsed, { non2xx, errors });
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

const spec = JSON.parse(process.argv[2]!) as LoadSpec;
if (loadGatewayBenchConfig(processEnv()).loadgen === 'autocannon') await runAutocannon(spec);
else await runLoad(spec);
