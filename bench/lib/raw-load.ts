// The raw-socket load both load generators (bench/gateway, bench/tools) run: keep-alive HTTP/1.1, prebuilt
// requests sent in turn, one in flight per connection, every latency recorded in microseconds. Responses may come
// with Content-Length or chunked (the MCP SDK's handler streams its JSON). A plain client keeps the generator's
// own cost low, so "direct" measures the server rather than the generator.
import { connect } from 'node:net';
import { Latencies, type LoadResult } from './latencies.ts';

/** Length of a complete response at the start of `buf`, or -1 when more bytes are needed; NaN: unparsable. */
function responseLength(buf: Buffer): number {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return -1;
  const head = buf.toString('latin1', 0, end);
  const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  if (cl) {
    const total = end + 4 + Number(cl[1]);
    return buf.length >= total ? total : -1;
  }
  if (!/\r\ntransfer-encoding:\s*chunked/i.test(head)) return Number.NaN;
  let pos = end + 4;
  for (;;) {
    const lineEnd = buf.indexOf('\r\n', pos);
    if (lineEnd < 0) return -1;
    const size = Number.parseInt(buf.toString('latin1', pos, lineEnd), 16);
    if (Number.isNaN(size)) return Number.NaN;
    pos = lineEnd + 2 + size + 2;
    if (buf.length < pos) return -1;
    if (size === 0) return pos;
  }
}

export interface RawLoad {
  url: string;
  /**
   * Whole HTTP/1.1 requests; connection c starts with request c and walks the list. A function builds request
   * n when it is sent (e.g. with a fresh DPoP proof).
   */
  requests: readonly Buffer[] | ((n: number) => Buffer);
  connections: number;
  /** Seconds. */
  duration: number;
}

export async function runRawLoad(spec: RawLoad): Promise<LoadResult> {
  const target = new URL(spec.url);
  const { requests } = spec;
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
          socket.write(typeof requests === 'function' ? requests(next) : requests[next % requests.length]!);
          next += 1;
        };
        socket.on('connect', send);
        socket.on('data', (chunk: Buffer) => {
          buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
          for (;;) {
            const total = responseLength(buf);
            if (Number.isNaN(total)) {
              errors += 1;
              socket.destroy();
              return;
            }
            if (total < 0) return;
            const status = Number(buf.toString('latin1', 9, 12));
            if (status < 200 || status > 299) {
              non2xx += 1;
              if (non2xx === 1) process.stderr.write(`${buf.toString('utf8', 0, Math.min(total, 600))}\n`);
            }
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
  return latencies.result(elapsed, { non2xx, errors });
}
