// A `redis-server` of the test's own on loopback (never the machine's shared one), without persistence, for
// tests that must restart it, flush it or configure authentication or TLS on it.
import { type ChildProcess, spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from './processes.ts';

export interface ThrowawayRedis {
  port: number;
  /** `redis://127.0.0.1:<port>` (no credentials). */
  url: string;
  /** The TLS port, when started with `tls`. */
  tlsPort: number | undefined;
  /** One command on a short-lived connection (as the `default` user, with `password` when set). */
  run<T>(fn: (r: Redis) => Promise<T>): Promise<T>;
  /** Kills it (SIGKILL: what it held is gone); does nothing when it is not running. */
  stop(): Promise<void>;
  /** After `stop()`: starts it again, empty, on the same port(s) with the same options. */
  start(): Promise<void>;
}

export interface ThrowawayRedisOptions {
  /** `requirepass` (the `default` user's password). */
  password?: string;
  /** ACL users, e.g. `gateway on >pw ~platform:* &platform:* +@all`. */
  users?: string[];
  /** Serve TLS on a second port with this certificate (clients are not asked for one). */
  tls?: { certFile: string; keyFile: string; caFile: string };
}

/** One command on a short-lived connection to 127.0.0.1:`port` (as the `default` user, with `password` if any). */
export async function onRedis<T>(
  port: number,
  password: string | undefined,
  fn: (r: Redis) => Promise<T>,
): Promise<T> {
  const r = new Redis({ port, host: '127.0.0.1', password, lazyConnect: true, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

export async function startThrowawayRedis(o: ThrowawayRedisOptions = {}): Promise<ThrowawayRedis> {
  const port = await freePort();
  const tlsPort = o.tls ? await freePort() : undefined;
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  if (o.password !== undefined) args.push('--requirepass', o.password);
  for (const u of o.users ?? []) args.push('--user', ...u.split(' '));
  if (o.tls) {
    args.push(
      '--tls-port',
      String(tlsPort),
      '--tls-cert-file',
      o.tls.certFile,
      '--tls-key-file',
      o.tls.keyFile,
    );
    args.push('--tls-ca-cert-file', o.tls.caFile, '--tls-auth-clients', 'no');
  }
  let server: ChildProcess | undefined;
  const run = <T>(fn: (r: Redis) => Promise<T>) => onRedis(port, o.password, fn);
  const start = async () => {
    const s = spawn('redis-server', args, { stdio: 'ignore' });
    server = s;
    for (let i = 0; ; i++) {
      try {
        await run((r) => r.ping());
        return;
      } catch (err) {
        if (i > 100 || s.exitCode !== null) throw err;
        await new Promise((res) => setTimeout(res, 50));
      }
    }
  };
  const stop = async () => {
    const s = server;
    server = undefined;
    if (!s || s.exitCode !== null) return;
    const exited = new Promise((res) => s.once('exit', res));
    s.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    tlsPort,
    run,
    stop,
    start,
  };
}
