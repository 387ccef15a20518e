import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { parseRedisUrl, type RedisConnection } from './config.ts';

/** A connection to one server, a Sentinel-managed master, or a Cluster: what every Redis user here takes. */
export type RedisClient = Redis | Cluster;

/** The options a caller chooses; the rest follows from the URL (lib/redis/config.ts). */
export interface RedisClientOptions {
  connectionName: string;
  lazyConnect?: boolean;
  connectTimeout?: number;
  enableOfflineQueue?: boolean;
  /** null: a command waits for the connection however long it takes. */
  maxRetriesPerRequest?: number | null;
  /** Delay before reconnection attempt `n` (ms); null stops reconnecting. */
  retryStrategy?: (attempt: number) => number | null;
  autoResubscribe?: boolean;
  /**
   * Commands issued during one turn of the event loop go out as one pipeline (ioredis `enableAutoPipelining`):
   * one write and one read for all of them instead of one each. Same commands, same order, same replies.
   */
  autoPipelining?: boolean;
}

/** How often a Cluster client re-reads the slot map: how fast it (and `onFailover`) sees a promoted replica. */
export const CLUSTER_SLOTS_REFRESH_MS = 1000;

function nodeOptions(
  c: Exclude<RedisConnection, { kind: 'standalone' }>,
  o: RedisClientOptions,
): RedisOptions {
  return {
    username: c.username,
    password: c.password,
    tls: c.tls ? {} : undefined,
    connectionName: o.connectionName,
    connectTimeout: o.connectTimeout,
    maxRetriesPerRequest: o.maxRetriesPerRequest,
  };
}

/** Opens the connection a Redis URL of any shape names (nothing is sent before `connect()` with `lazyConnect`). */
export function createRedisClient(url: string, o: RedisClientOptions): RedisClient {
  const c = parseRedisUrl(url);
  const { autoPipelining, ...rest } = o;
  const common = { ...rest, enableAutoPipelining: autoPipelining === true };
  if (c.kind === 'standalone') return new Redis(url, common);
  if (c.kind === 'sentinel') {
    return new Redis({
      ...common,
      ...nodeOptions(c, o),
      sentinels: c.sentinels,
      name: c.name,
      db: c.db,
      role: 'master',
      sentinelUsername: c.sentinelUsername,
      sentinelPassword: c.sentinelPassword,
      enableTLSForSentinelMode: c.tls,
      sentinelTLS: c.tls ? {} : undefined,
      // Also listen to the Sentinels' +switch-master: a master that stops answering without closing the
      // socket is left at once rather than when the socket times out.
      failoverDetector: true,
    });
  }
  return new Cluster(c.nodes, {
    enableAutoPipelining: common.enableAutoPipelining,
    lazyConnect: o.lazyConnect,
    enableOfflineQueue: o.enableOfflineQueue,
    clusterRetryStrategy: o.retryStrategy ?? undefined,
    slotsRefreshInterval: CLUSTER_SLOTS_REFRESH_MS,
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    redisOptions: nodeOptions(c, o),
  });
}

/** Whether the URL names a Cluster (its clients have no `scanStream`; see `masters`). */
export const isCluster = (client: RedisClient): client is Cluster => client instanceof Cluster;

/** Every connection that holds keys: the one server, or each Cluster master (a SCAN must visit all of them). */
export function masters(client: RedisClient): Redis[] {
  return isCluster(client) ? client.nodes('master') : [client];
}

/**
 * Calls `fn` whenever the client may be talking to a different master than before: every 'ready' (the first
 * connection, a reconnection, a Sentinel failover), and for a Cluster every change of its set of masters (a
 * replica promoted: the client stays 'ready' then, so 'ready' alone would miss it). Returns the unsubscribe.
 */
export function onFailover(client: RedisClient, fn: () => void): () => void {
  const onReady = () => fn();
  client.on('ready', onReady);
  if (!isCluster(client)) return () => client.off('ready', onReady);
  const key = () =>
    client
      .nodes('master')
      .map((n) => `${n.options.host}:${n.options.port}`)
      .sort()
      .join(',');
  let last = '';
  const onRefresh = () => {
    const now = key();
    if (now === last) return;
    const changed = last !== '';
    last = now;
    if (changed) fn();
  };
  client.on('refresh', onRefresh);
  return () => {
    client.off('ready', onReady);
    client.off('refresh', onRefresh);
  };
}
