// Child processes of the benchmark: pinning with taskset, reading their first JSON line, CPU time from /proc.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';

function hasTaskset(): boolean {
  try {
    execFileSync('taskset', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export const PIN = hasTaskset() && availableParallelism() >= 2;

/** Runs `node args…` (pinned to `core` when taskset is available). */
export function spawnNode(core: number, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  const [cmd, argv] = PIN
    ? ['taskset', ['-c', String(core), process.execPath, ...args]]
    : [process.execPath, args];
  return spawn(cmd as string, argv as string[], { env, stdio: ['ignore', 'pipe', 'pipe'] });
}

export function firstJsonLine<T>(
  child: ChildProcess,
  match: (v: Record<string, unknown>) => boolean = () => true,
): Promise<T> {
  return new Promise((resolve, reject) => {
    let buf = '';
    // The first 16 KiB of each stream, for the error if the child exits first.
    let out = '';
    let err = '';
    const keep = (text: string, d: Buffer) => (text.length < 16_384 ? text + d.toString() : text);
    child.stderr!.on('data', (d: Buffer) => {
      err = keep(err, d);
    });
    // Read line by line until the match; after it the output is still drained (a full pipe would stall the
    // child) but no longer kept: a server logging every request would otherwise grow it without end.
    const onData = (d: Buffer) => {
      out = keep(out, d);
      buf += d.toString();
      const lines = buf.split('\n');
      // The last piece may be a line still being written (kept for the next chunk) or a last line without a
      // newline (tried now: a partial one does not parse).
      buf = lines[lines.length - 1]!;
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        try {
          const v = JSON.parse(line) as Record<string, unknown>;
          if (match(v)) {
            child.stdout!.off('data', onData);
            child.stdout!.resume();
            return resolve(v as T);
          }
        } catch {
          // not JSON
        }
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`child exited (${code}) early:\n${out}\n${err}`)));
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); undefined elsewhere. */
export function cpuSeconds(pid: number | undefined): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat(5), counted after the command name (fields 1–2).
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds (user + system) used so far by every process with one of `names` as its command (Linux /proc),
 * by pid: a server on this machine the benchmark's load also runs (Postgres' backends, Redis). The difference of
 * two readings is that server's CPU between them (a process that started in between counts from zero).
 */
export function cpuSecondsByName(names: readonly string[]): Map<number, number> {
  const out = new Map<number, number>();
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (!names.includes(comm)) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(pid), (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS);
    } catch {
      // gone in between
    }
  }
  return out;
}

/** The CPU seconds used between two cpuSecondsByName readings. */
export function cpuSecondsBetween(before: Map<number, number>, after: Map<number, number>): number {
  let s = 0;
  for (const [pid, t] of after) s += t - (before.get(pid) ?? 0);
  return s;
}

const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();
