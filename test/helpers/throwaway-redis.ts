// A `redis-server` of the test's own on a free loopback port, without persistence: for tests that flush, stop or
// restart Redis (never the shared one).
import { type ChildProcess, spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from './processes.ts';

export interface ThrowawayRedis {
  url: string;
  /** One command on a short-lived connection. */
  run<T>(fn: (r: Redis) => Promise<T>): Promise<T>;
  stop(): Promise<void>;
}

export async function startThrowawayRedis(): Promise<ThrowawayRedis> {
  const port = await freePort();
  const server: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const run = async <T>(fn: (r: Redis) => Promise<T>): Promise<T> => {
    const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null });
    r.on('error', () => {});
    try {
      await r.connect();
      return await fn(r);
    } finally {
      r.disconnect();
    }
  };
  for (let i = 0; ; i++) {
    try {
      await run((r) => r.ping());
      break;
    } catch (err) {
      if (i > 100) throw err;
      await new Promise((res) => setTimeout(res, 50));
    }
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    run,
    async stop() {
      if (server.exitCode !== null) return;
      const exited = new Promise((res) => server.once('exit', res));
      server.kill('SIGKILL');
      await exited;
    },
  };
}
