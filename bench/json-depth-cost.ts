// What the JSON depth check costs the gateway per request: `jsonTooDeep` over the benchmark's tools/call body
// (bench/gateway/shape.ts), a 64 KiB body and a 1 MiB body (GATEWAY_MAX_BODY_BYTES), beside JSON.parse of the
// same bytes for scale, in alternating rounds. `node bench/json-depth-cost.ts`
import { jsonTooDeep } from '../lib/json-depth.ts';
import { REQUEST_BODY } from './gateway/shape.ts';

const ROUNDS = 5;

function body(bytes: number): Buffer {
  const item = JSON.parse(REQUEST_BODY);
  const items: unknown[] = [];
  while (JSON.stringify(items).length < bytes) items.push(item);
  return Buffer.from(JSON.stringify(items));
}

const shapes: Array<[string, Buffer, number]> = [
  [`tools/call (${Buffer.byteLength(REQUEST_BODY)} B)`, Buffer.from(REQUEST_BODY), 1_000_000],
  ['64 KiB', body(64 * 1024), 5_000],
  ['1 MiB', body(1024 * 1024), 300],
];

let sink = 0;
function ns(n: number, fn: () => unknown): number {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) if (fn()) sink++;
  return Number(process.hrtime.bigint() - t) / n;
}

for (const [name, buf, n] of shapes) {
  const depth: number[] = [];
  const parse: number[] = [];
  ns(n, () => jsonTooDeep(buf));
  for (let r = 0; r < ROUNDS; r++) {
    depth.push(ns(n, () => jsonTooDeep(buf)));
    parse.push(ns(Math.ceil(n / 4), () => JSON.parse(buf.toString('utf8'))));
  }
  const fmt = (xs: number[]) =>
    xs.map((x) => (x < 10_000 ? `${x.toFixed(0)} ns` : `${(x / 1000).toFixed(1)} µs`)).join(', ');
  console.log(`${name}: jsonTooDeep ${fmt(depth)} | JSON.parse ${fmt(parse)}`);
}
if (sink < 0) console.log(sink);
