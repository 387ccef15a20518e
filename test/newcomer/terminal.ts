// A newcomer's terminal: command lines typed into `sh` in the checkout, with the environment a login shell
// would have (PATH with the system Node first, HOME) and nothing exported by hand. Each command runs in its own
// process group, so Ctrl-C can be sent to it as a terminal sends it: to the whole group.
import { type ChildProcess, spawn } from 'node:child_process';

export interface Running {
  child: ChildProcess;
  /** stdout and stderr so far, interleaved as they arrived. */
  output(): string;
  stdout(): string;
  stderr(): string;
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  exited: Promise<number | null>;
  /** Ctrl-C: SIGINT to the process group; resolves with the exit code. */
  interrupt(): Promise<number | null>;
}

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

export class Terminal {
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  constructor(cwd: string, env: Readonly<Record<string, string>>) {
    this.cwd = cwd;
    this.env = env;
  }

  /** Starts `line` and returns at once. */
  start(line: string): Running {
    const child = spawn('sh', ['-c', line], {
      cwd: this.cwd,
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let all = '';
    let out = '';
    let err = '';
    const waiters = new Set<() => void>();
    const wake = () => {
      for (const w of [...waiters]) w();
    };
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      all += d;
      wake();
    });
    child.stderr!.on('data', (d: Buffer) => {
      err += d;
      all += d;
      wake();
    });
    let done = false;
    const exited = new Promise<number | null>((resolve) =>
      child.once('close', (code, signal) => {
        done = true;
        wake();
        resolve(code ?? (signal ? 128 : null));
      }),
    );
    return {
      child,
      exited,
      output: () => all,
      stdout: () => out,
      stderr: () => err,
      waitFor(pattern, timeoutMs = 20_000) {
        return new Promise((resolve, reject) => {
          const timer = setTimeout(() => {
            waiters.delete(check);
            reject(new Error(`\`${line}\`: no ${pattern} within ${timeoutMs} ms; output:\n${all}`));
          }, timeoutMs);
          const check = () => {
            const m = pattern.exec(all);
            if (m || done) {
              clearTimeout(timer);
              waiters.delete(check);
              if (m) resolve(m);
              else reject(new Error(`\`${line}\` ended before ${pattern}; output:\n${all}`));
            }
          };
          waiters.add(check);
          check();
        });
      },
      async interrupt() {
        if (!done) process.kill(-child.pid!, 'SIGINT');
        // A stack that does not stop within 30 s is killed, so a failing run leaves nothing behind.
        const timer = setTimeout(() => {
          if (!done) process.kill(-child.pid!, 'SIGKILL');
        }, 30_000);
        const code = await exited;
        clearTimeout(timer);
        return code;
      },
    };
  }

  /** Runs `line` to completion. */
  async run(line: string, timeoutMs = 30_000): Promise<Finished> {
    const r = this.start(line);
    const timer = setTimeout(() => process.kill(-r.child.pid!, 'SIGKILL'), timeoutMs);
    const code = await r.exited;
    clearTimeout(timer);
    return { code, stdout: r.stdout(), stderr: r.stderr() };
  }
}
