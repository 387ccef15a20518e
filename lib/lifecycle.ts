import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { flushLogs, type Logger } from './logger.ts';

export function listen(server: Server, port: number, host?: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/**
 * The idle time a server behind our own proxies keeps a connection open: the proxy in front (the gateway's
 * undici pool, Caddy's `keepalive` in deploy/Caddyfile) ends idle connections before it, never the server.
 */
export const UPSTREAM_KEEP_ALIVE_MS = 5_000;
/** How long a SIGTERM'd server hands connections back (see `linger`): longer than the proxies' idle time. */
export const SHUTDOWN_LINGER_MS = 6_000;

/**
 * Hands a server's kept-alive connections back to their clients before it closes: for up to `lingerMs`, every
 * answer says `Connection: close` (so the client does not send on that connection again) while the server
 * still listens, and it stops early once no connection is left. Closing an idle connection from the server's
 * side instead races a client that is just sending a request on it, which then fails although the server never
 * read it. A connection idle the whole time is ended by the client itself when `lingerMs` is longer than the
 * idle time the server advertises (`Keep-Alive: timeout`, i.e. `server.keepAliveTimeout`).
 */
export async function linger(server: Server, lingerMs: number): Promise<void> {
  server.prependListener('request', (_req, res) => {
    res.shouldKeepAlive = false;
  });
  const until = Date.now() + lingerMs;
  while (Date.now() < until) {
    const open = await new Promise<number>((resolve) => server.getConnections((_e, n) => resolve(n ?? 0)));
    if (open === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Stops accepting, lets in-flight requests finish (bounded), then closes the rest. */
export async function drain(server: Server, graceMs = 10_000): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const timer = setTimeout(() => server.closeAllConnections(), graceMs);
  timer.unref();
  await closed;
  clearTimeout(timer);
}

/** How long an exiting process waits for its last log lines to be written (lib/logger.ts `flushLogs`). */
const LOG_FLUSH_MS = 2000;

function exitAfterLogs(log: Logger, code: number): void {
  void flushLogs(log, LOG_FLUSH_MS).then(() => process.exit(code));
}

/**
 * Runs `stop` once on SIGTERM or SIGINT and exits 0 when it finishes (1 if it throws).
 */
export function onShutdown(log: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    stop().then(
      () => {
        log.info('stopped');
        exitAfterLogs(log, 0);
      },
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        exitAfterLogs(log, 1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}
