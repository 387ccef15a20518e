import { Redis } from 'ioredis';
import type { Logger } from '../lib/logger.ts';

/**
 * Logs one warning when Redis becomes unreachable and one line when every connection is back, however many
 * reconnection attempts (each an ioredis 'error') happen in between.
 */
export class RedisOutage {
  readonly #log: Logger;
  readonly #detail: Record<string, unknown>;
  readonly #down = new Set<string>();
  #inOutage = false;

  constructor(log: Logger, detail: Record<string, unknown>) {
    this.#log = log;
    this.#detail = detail;
  }

  get inOutage(): boolean {
    return this.#inOutage;
  }

  down(connection: string, err?: Error): void {
    this.#down.add(connection);
    if (this.#inOutage) return;
    this.#inOutage = true;
    this.#log.warn(
      { ...this.#detail, connection, err: err ? { message: err.message } : undefined },
      'redis unavailable: serving from memory until it is back',
    );
  }

  up(connection: string): void {
    this.#down.delete(connection);
    if (this.#inOutage && this.#down.size === 0) {
      this.#inOutage = false;
      this.#log.info({ ...this.#detail }, 'redis reachable again');
    }
  }
}

export interface RedisClients {
  /** Commands (JWKS cache, denylist resync). Fails fast while disconnected: no request waits on Redis. */
  cmd: Redis;
  /** The `platform:revocations` subscription. */
  sub: Redis;
  close(): Promise<void>;
}

export function createRedisClients(url: string, outage: RedisOutage): RedisClients {
  const common = {
    lazyConnect: true,
    connectTimeout: 2000,
    // Reconnect forever, quickly: recovery must not need a restart.
    retryStrategy: (attempt: number) => Math.min(100 * attempt, 1000),
  };
  const cmd = new Redis(url, {
    ...common,
    connectionName: 'gateway',
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
  });
  const sub = new Redis(url, {
    ...common,
    connectionName: 'gateway-revocations',
    // redis-sync.ts subscribes on every 'ready' and resyncs after the subscription is confirmed.
    autoResubscribe: false,
    maxRetriesPerRequest: null,
  });
  // Our own disconnect at shutdown is not an outage.
  let closing = false;
  for (const [name, conn] of [
    ['cmd', cmd],
    ['sub', sub],
  ] as const) {
    conn.on('error', (err: Error) => closing || outage.down(name, err));
    conn.on('close', () => closing || outage.down(name));
    conn.on('ready', () => outage.up(name));
  }
  return {
    cmd,
    sub,
    async close() {
      closing = true;
      cmd.disconnect();
      sub.disconnect();
    },
  };
}
