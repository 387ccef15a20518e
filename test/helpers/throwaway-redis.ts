// A `redis-server` of the test's own on loopback (never the machine's shared one), without persistence, for
// tests that must restart it, flush it or configure authentication or TLS on it.
import { type ChildProcess, spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from './processes.ts';

export interface ThrowawayRedis {
  port: number;
  /** The TLS port, when started with `tls`. */
  tlsPort: number | undefined;
  stop(): Promise<void>;
}

export interface ThrowawayRedisOptions {
  /** `requirepass` (the `default` user's password). */
  password?: string;
  /** ACL users, e.g. `gateway on >pw ~platform:* &platform:* +@all`. */
  users?: string[];
  /** Serve TLS on a second port with this certificate (clients are not asked for one). */
  tls?: { certFile: string; keyFile: string; caFile: string };
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
  const server: ChildProcess = spawn('redis-server', args, { stdio: 'ignore' });
  for (let i = 0; ; i++) {
    const probe = new Redis({
      port,
      host: '127.0.0.1',
      password: o.password,
      lazyConnect: true,
      retryStrategy: () => null,
    });
    probe.on('error', () => {});
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch (err) {
      if (i > 100 || server.exitCode !== null) throw err;
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      probe.disconnect();
    }
  }
  return {
    port,
    tlsPort,
    async stop() {
      if (server.exitCode !== null) return;
      const exited = new Promise((r) => server.once('exit', r));
      server.kill('SIGKILL');
      await exited;
    },
  };
}
