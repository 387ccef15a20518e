// bench/gateway/core-split.ts reads perf's report into seconds by process and kind of code, and the row says them
// in µs a request: the figures docs/performance.md quotes for where the gateway's and HAProxy's time goes.
import { describe, expect, it } from 'vitest';
import { addRun, emptyTargetCoreTime, parseCoreTime, splitRow } from '../../../bench/gateway/core-split.ts';

// What `perf report --no-children -g none --sort pid,dso -n --stdio -t ';'` prints (trimmed), at 999 samples a second.
const REPORT = `# To display the perf.data header info, please use --header/--header-only options.
#
# Overhead;Samples;Pid:Command;Shared Object
#
 26.28% ; 999       ;  12712:haproxy        ;libcrypto.so.3
 24.73% ; 1998       ;  12712:haproxy        ;haproxy
 13.46% ; 999       ;  12712:haproxy        ;[kernel.kallsyms]
  6.28% ; 999       ;  12712:haproxy        ;libc.so.6
 16.44% ; 999       ;  12694:MainThread     ;node
  5.61% ; 999       ;  12694:MainThread     ;[kernel.kallsyms]
  4.40% ; 999       ;  12694:MainThread     ;[JIT] tid 12694
  0.50% ; 999       ;  12716:V8Worker       ;node
  0.12% ; 24       ;      0:swapper        ;[kernel.kallsyms]
`;

describe('core split', () => {
  it('counts each process by kind of code: kernel, a crypto library, the rest (JIT and node included)', () => {
    const time = parseCoreTime(REPORT);
    expect(time.get(12712)).toEqual({ kernel: 1, crypto: 1, rest: 3 });
    expect(time.get(12694)).toEqual({ kernel: 1, crypto: 0, rest: 2 });
    expect(time.get(0)?.kernel).toBeCloseTo(24 / 999);
    expect(time.has(1)).toBe(false);
  });

  it('says µs a request over every run of a target, each process with all its threads and nothing else', () => {
    const into = emptyTargetCoreTime();
    const time = parseCoreTime(REPORT);
    // The upstream's second thread (12716) is counted with it; the idle core (pid 0) with nobody.
    const threads = { proxy: [12712], upstream: [12694, 12716] };
    addRun(into, time, threads, 50_000);
    addRun(into, time, threads, 50_000);
    // 2 s of kernel over 100 000 requests: 20 µs; crypto 20, rest 60, proxy 100, upstream 2 × 4 s = 80.
    expect(splitRow('haproxy', into)).toBe(
      `| ${'haproxy'.padEnd(32)} |   20.0 |   20.0 |   60.0 |  100.0 |     80.0 |`,
    );
    expect(splitRow('idle', emptyTargetCoreTime())).toContain('—');
  });
});
