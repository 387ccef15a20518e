// BENCH_PERF: where core 0's time goes in each target's measured runs, µs a request, by process and by kind
// of code — the kernel (the sockets), a crypto library, everything else the process runs — so a ratio between
// the gateway and HAProxy can be read as the work each does. `perf record -C 0` samples the core the proxy and
// the upstream share while a run's load lasts (Debian's linux-perf; software clock sampling, which a VM
// without hardware counters still has).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';

/**
 * Samples a second (perf's -F): a few thousand per 6 s run. Sampling is not free: the processes on the core
 * read ~10 % more CPU a request with it (docs/performance.md § Eighth confirmation), so compare rows of one run.
 */
const FREQUENCY = 999;

/** Whether `bin` runs and can sample a CPU here (root or a permissive perf_event_paranoid). */
export function perfUsable(bin: string): boolean {
  try {
    execFileSync(bin, ['record', '-C', '0', '-F', '99', '-o', '/dev/null', '--', 'true'], {
      stdio: 'ignore',
    });
    return true;
  } catch {
    return false;
  }
}

/** A recording of `core` until stop(); stop resolves once perf has written its file. */
export function recordCore(bin: string, core: number, file: string): { stop(): Promise<void> } {
  const child: ChildProcess = spawn(
    bin,
    ['record', '-q', '-C', String(core), '-F', String(FREQUENCY), '-o', file],
    { stdio: 'ignore' },
  );
  return {
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGINT');
      await exited;
    },
  };
}

/** Where a process's samples are counted. */
const KINDS = ['kernel', 'crypto', 'rest'] as const;
export type CodeKind = (typeof KINDS)[number];
const zero = (): Record<CodeKind, number> => ({ kernel: 0, crypto: 0, rest: 0 });

function kindOf(dso: string): CodeKind {
  if (dso.startsWith('[kernel')) return 'kernel';
  // HAProxy's OpenSSL is a shared library; Node's is linked into the node binary and counts as `rest`.
  if (dso.startsWith('libcrypto')) return 'crypto';
  return 'rest';
}

/** Seconds of core time in a recording, by thread id and kind of code. */
export type CoreTime = Map<number, Record<CodeKind, number>>;

export function readCoreTime(bin: string, file: string): CoreTime {
  return parseCoreTime(
    execFileSync(
      bin,
      ['report', '-i', file, '--no-children', '-g', 'none', '--sort', 'pid,dso', '-n', '--stdio', '-t', ';'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 * 1024 * 1024 },
    ),
  );
}

/** `perf report --sort pid,dso -n -t ';'` read: each line " 26.28% ; 5255 ;  12712:haproxy ;libcrypto.so.3". */
export function parseCoreTime(report: string): CoreTime {
  const time: CoreTime = new Map();
  for (const line of report.split('\n')) {
    if (line.startsWith('#')) continue;
    const [, samples, pidComm, dso] = line.split(';').map((f) => f.trim());
    const pid = Number(pidComm?.split(':')[0]);
    const n = Number(samples);
    if (!pidComm || !Number.isInteger(pid) || !Number.isFinite(n) || !dso) continue;
    const entry = time.get(pid) ?? zero();
    entry[kindOf(dso)] += n / FREQUENCY;
    time.set(pid, entry);
  }
  return time;
}

/** One target's core time over its measured runs: seconds by kind of code, for the proxy and the upstream. */
export interface TargetCoreTime {
  proxy: Record<CodeKind, number>;
  upstream: Record<CodeKind, number>;
  requests: number;
}

export const emptyTargetCoreTime = (): TargetCoreTime => ({ proxy: zero(), upstream: zero(), requests: 0 });

/** The thread ids of a process (Linux /proc): perf counts each thread apart, by its own id. */
export function threadsOf(pid: number | undefined): number[] {
  if (pid === undefined) return [];
  try {
    return readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    return [pid];
  }
}

/**
 * Adds one run's recording: the samples of every thread of the proxy and of the upstream (a Node process's
 * libuv and V8 threads too: WebCrypto verifies on them), no other process's, and the run's requests.
 */
export function addRun(
  into: TargetCoreTime,
  time: CoreTime,
  threads: { proxy: readonly number[]; upstream: readonly number[] },
  requests: number,
): void {
  for (const side of ['proxy', 'upstream'] as const) {
    for (const tid of threads[side]) {
      const t = time.get(tid);
      if (t === undefined) continue;
      for (const kind of KINDS) into[side][kind] += t[kind];
    }
  }
  into.requests += requests;
}

/** The table's row: µs a request. */
export function splitRow(name: string, t: TargetCoreTime): string {
  const us = (s: number) => (t.requests === 0 ? '—' : ((s * 1e6) / t.requests).toFixed(1));
  const { kernel, crypto, rest } = t.proxy;
  const up = t.upstream.kernel + t.upstream.crypto + t.upstream.rest;
  return `| ${name.padEnd(32)} | ${us(kernel).padStart(6)} | ${us(crypto).padStart(6)} | ${us(rest).padStart(6)} | ${us(
    kernel + crypto + rest,
  ).padStart(6)} | ${us(up).padStart(8)} |`;
}

export const SPLIT_HEADER = [
  '',
  "where core 0's time went (perf record -C 0), µs a request: the proxy's kernel time, its crypto library (libcrypto;",
  "Node's OpenSSL is inside the node binary and counts under 'rest'), the rest of the proxy, and the upstream",
  '',
  '| target                           | kernel | crypto |   rest |  proxy | upstream |',
  '|----------------------------------|--------|--------|--------|--------|----------|',
];
