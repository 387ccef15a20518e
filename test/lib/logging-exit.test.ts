// A server whose output nobody reads any more (the reader died) still stops on SIGTERM: logging must not hold
// the process. With pino's default asynchronous output it never exited (its synchronous flush at exit retried
// the EPIPE write for ever).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const SERVER = fileURLToPath(new URL('./fixtures/logging-server.ts', import.meta.url));
let child: ChildProcess | undefined;

afterEach(() => {
  child?.kill('SIGKILL');
});

function start(batched: boolean): Promise<ChildProcess> {
  const c = spawn(process.execPath, [SERVER], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, LOG_BATCHED: batched ? '1' : '0' },
  });
  child = c;
  return new Promise((resolve, reject) => {
    c.stdout!.once('data', () => resolve(c));
    c.once('exit', (code) => reject(new Error(`exited early (${code})`)));
  });
}

/** The exit code, or 'still running' after `ms`. */
async function exitWithin(c: ChildProcess, ms: number): Promise<number | null | 'still running'> {
  const timer = new Promise<'still running'>((r) => setTimeout(() => r('still running'), ms).unref());
  const exited = once(c, 'exit').then(([code]) => code as number | null);
  return Promise.race([exited, timer]);
}

describe.each([
  ['pino output', false],
  ['batched output (tool servers)', true],
])('logging and shutdown, %s', (_, batched) => {
  it('a server still exits 0 on SIGTERM after the reader of its output went away', async () => {
    const c = await start(batched);
    // The reader goes away: every write to standard output now fails with EPIPE.
    c.stdout!.destroy();
    c.kill('SIGTERM');
    expect(await exitWithin(c, 5000)).toBe(0);
  });

  it('a server whose output is read exits 0 on SIGTERM with its last lines written', async () => {
    const c = await start(batched);
    let out = '';
    c.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
    });
    c.kill('SIGTERM');
    expect(await exitWithin(c, 5000)).toBe(0);
    const last = out
      .trim()
      .split('\n')
      .slice(-2)
      .map((l) => JSON.parse(l).msg);
    expect(last).toEqual(['shutting down', 'stopped']);
  });
});
