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
