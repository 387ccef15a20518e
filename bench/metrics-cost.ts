// What the request metrics cost the gateway per request: the work `instrument()` adds (a 'close' listener, an
// hrtime pair, one counter increment, one histogram observation), measured against the same loop without it,
// in the same run. `node bench/metrics-cost.ts`
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createProcessMetrics, instrument } from '../lib/metrics.ts';

const N = 300_000;
const ROUNDS = 5;
const metrics = createProcessMetrics('bench');
const handler = (_req: IncomingMessage, res: ServerResponse) => {
  res.emit('close');
};
const wrapped = instrument(handler, metrics.http, () => 'deals');

function fakeExchange(): [IncomingMessage, ServerResponse] {
  const res = Object.assign(new EventEmitter(), { writableFinished: true, statusCode: 200 });
  return [{ url: '/deals/mcp' } as IncomingMessage, res as unknown as ServerResponse];
}

function perRequestNs(h: typeof handler): number {
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    const [req, res] = fakeExchange();
    h(req, res);
  }
  return Number(process.hrtime.bigint() - t) / N;
}

perRequestNs(handler);
perRequestNs(wrapped);
for (let r = 1; r <= ROUNDS; r++) {
  const base = perRequestNs(handler);
  const inst = perRequestNs(wrapped);
  process.stdout.write(
    `round ${r}: without ${base.toFixed(0)} ns, with metrics ${inst.toFixed(0)} ns per request: +${(inst - base).toFixed(0)} ns\n`,
  );
}
