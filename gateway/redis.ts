import type { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import type { Logger } from '../lib/logger.ts';
import { createRedisClient, isCluster, type RedisClient } from '../lib/redis/client.ts';
import { parseRedisUrl, type RedisConnection } from '../lib/redis/config.ts';

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
  cmd: RedisClient;
  /**
   * The `platform:revocations` subscription: always one plain connection, whose every 'ready' makes
   * revocation/redis-sync.ts subscribe and resync. On a Cluster (where PUBLISH reaches every node) it is a
   * connection to one node that moves to another node when that one goes away.
   */
  sub: Redis;
  close(): Promise<void>;
}

const common = {
  lazyConnect: true,
  connectTimeout: 2000,
  // Reconnect forever, quickly: recovery must not need a restart.
  retryStrategy: (attempt: number) => Math.min(100 * attempt, 500),
};

/**
 * The Cluster's subscription connection. ioredis's own Cluster subscriber re-attaches to another node silently
 * (no 'ready' to resync on, ioredis#1589), so the gateway keeps its own: a plain connection to a seed node that,
 * before each reconnection attempt, moves to the next node the Cluster client knows (the seeds before it knows
 * any). ioredis's standalone connector reads host and port from the client's options at every connect.
 */
function clusterSubscriber(c: Extract<RedisConnection, { kind: 'cluster' }>, cmd: RedisClient): Redis {
  let turn = 0;
  const sub: Redis = new Redis({
    ...common,
    host: c.nodes[0]!.host,
    port: c.nodes[0]!.port,
    username: c.username,
    password: c.password,
    tls: c.tls ? {} : undefined,
    connectionName: 'gateway-revocations',
    autoResubscribe: false,
    maxRetriesPerRequest: null,
    retryStrategy: (attempt: number) => {
      const known = isCluster(cmd)
        ? cmd.nodes('all').map((n) => ({ host: n.options.host!, port: n.options.port! }))
        : [];
      const list = known.length > 0 ? known : c.nodes;
      turn += 1;
      const next = list[turn % list.length]!;
      sub.options.host = next.host;
      sub.options.port = next.port;
      return Math.min(50 * attempt, 500);
    },
  });
  return sub;
}

export function createRedisClients(url: string, outage: RedisOutage): RedisClients {
  const connection = parseRedisUrl(url);
  const cmd = createRedisClient(url, {
    ...common,
    connectionName: 'gateway',
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // The commands of the requests that arrived in one turn of the event loop (each DPoP proof's SET NX, a
    // limit's lease) go out as one write, and their replies come back in one read: under load that is one
    // syscall each way for many requests instead of one per request (docs/performance.md § DPoP).
    autoPipelining: true,
  });
  const sub =
    connection.kind === 'cluster'
      ? clusterSubscriber(connection, cmd)
      : (createRedisClient(url, {
          ...common,
          connectionName: 'gateway-revocations',
          // redis-sync.ts subscribes on every 'ready' and resyncs after the subscription is confirmed.
          autoResubscribe: false,
          maxRetriesPerRequest: null,
        }) as Redis);
  // Our own disconnect at shutdown is not an outage.
  let closing = false;
  for (const [name, conn] of [
    ['cmd', cmd as EventEmitter],
    ['sub', sub as EventEmitter],
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
