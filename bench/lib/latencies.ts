// What both raw-socket load generators (bench/gateway, bench/tools) record and print.

/** One load run's outcome, printed by a load generator as one JSON line. Latencies in milliseconds. */
export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
}

/** Per-request latencies in µs, in a typed array that grows by doubling (no allocation per sample). */
export class Latencies {
  private samples = new Float64Array(1 << 20);
  count = 0;

  add(micros: number): void {
    if (this.count === this.samples.length) {
      const bigger = new Float64Array(this.samples.length * 2);
      bigger.set(this.samples);
      this.samples = bigger;
    }
    this.samples[this.count++] = micros;
  }

  /** The run's result: req/s over `elapsedSeconds`, p50 and p99 in ms. */
  result(elapsedSeconds: number, outcome: { non2xx: number; errors: number }): LoadResult {
    const n = this.count;
    const sorted = this.samples.subarray(0, n).sort();
    const pct = (p: number) => (n === 0 ? 0 : sorted[Math.min(n - 1, Math.floor((p / 100) * n))]! / 1000);
    return { requestsPerSecond: n / elapsedSeconds, p50: pct(50), p99: pct(99), total: n, ...outcome };
  }
}

/** A load run with the CPU time each watched process spent per request (µs), server first. */
export type Measured = LoadResult & { cpuUsPerRequest: number[] };

/** Several rounds of one target as one: rates and CPU per request over all requests, latencies the median round's. */
export function combine(runs: Measured[]): Measured {
  const total = runs.reduce((n, r) => n + r.total, 0);
  const seconds = runs.reduce((n, r) => n + r.total / r.requestsPerSecond, 0);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return {
    requestsPerSecond: total / seconds,
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    total,
    non2xx: runs.reduce((n, r) => n + r.non2xx, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    cpuUsPerRequest: runs[0]!.cpuUsPerRequest.map(
      (_, i) => runs.reduce((n, r) => n + r.cpuUsPerRequest[i]! * r.total, 0) / total,
    ),
  };
}
