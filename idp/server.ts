import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { ConfigError } from '../lib/config.ts';
import { createPool, ident, type Pool } from '../lib/db.ts';
import { MemoryDpopReplayStore, RedisDpopReplayStore } from '../lib/dpop/index.ts';
import { postgresCheck } from '../lib/health.ts';
import { DEFAULT_BODY_TIMEOUT_MS } from '../lib/http.ts';
import { drain, linger, listen } from '../lib/lifecycle.ts';
import type { Logger } from '../lib/logger.ts';
import { instrument } from '../lib/metrics.ts';
import { createRedisClient, onFailover, type RedisClient } from '../lib/redis/client.ts';
import { logRedisErrors } from '../lib/redis/error-log.ts';
import { checkRedisCredentials } from '../lib/redis-auth.ts';
import { RedisRevocationPublisher, type RevocationPublisher } from '../lib/revocation.ts';
import { MemorySingleUseStore, RedisSingleUseStore } from '../lib/single-use.ts';
import type { Tracing } from '../lib/telemetry/index.ts';
import { createIdpHandler, type Handler, withResponseHeaders } from './app.ts';
import { createMetadataClients } from './cimd/index.ts';
import { createClientKeySets } from './client-auth/index.ts';
import type { IdpConfig } from './config.ts';
import { type ConnectionsService, createConnections } from './connections/service.ts';
import type { IdpContext } from './context.ts';
import { createIdpDpop } from './dpop/index.ts';
import { createEntitlements } from './entitlements/entitlements.ts';
import { createRoleSource } from './entitlements/roles.ts';
import { createEntityGrants } from './entity-grants/entity-grants.ts';
import { deriveKey } from './keys/crypto.ts';
import { createKeyRing, type KeyRing } from './keys/index.ts';
import { countingRefusals, type IdpMetrics, idpRouteOf } from './metrics.ts';
import { countedFetches, createOutboundBudget } from './outbound/index.ts';
import { createRateLimiter } from './rate-limit.ts';
import { createRevocationService, keepDenylistRestored, type RevocationService } from './revocation.ts';
import { routes } from './routes.ts';
import { createAdminAuditStore } from './store/admin-audit.ts';
import { createBlockStore } from './store/blocks.ts';
import { createClientStore } from './store/clients.ts';
import { createCodeStore } from './store/codes.ts';
import { createConsentStore } from './store/consents.ts';
import { createDeviceCodeStore } from './store/device-codes.ts';
import { DatabaseDpopReplayStore } from './store/dpop-proofs.ts';
import { schedulePurge } from './store/purge.ts';
import { createRefreshTokenStore } from './store/refresh-tokens.ts';
import { createRefusalStore } from './store/refusals.ts';
import { createSessionStore } from './store/sessions.ts';
import { gatewayClient } from './token-exchange/gateway-client.ts';
import { TrustedIssuers } from './trusted-issuers/index.ts';

/**
 * A request answered before its body arrived whole (refused before reading it: no bearer at the admin API, a
 * 405, a rate limit) ends its connection with the answer, rather than Node reading the rest of a trickled body
 * into the void for as long as the sender likes and keeping the connection.
 */
function closeUnreadBodies(handler: Handler): Handler {
  return (req, res) => {
    const writeHead = res.writeHead;
    // Every answer's head goes through writeHead (res.end without it too); `Connection: close` then tells the
    // client not to reuse the connection, and Node ends it after the answer.
    res.writeHead = ((...args: Parameters<typeof writeHead>) => {
      if (!req.complete) res.shouldKeepAlive = false;
      return writeHead.apply(res, args);
    }) as typeof writeHead;
    handler(req, res);
  };
}

export interface RunningIdp {
  server: Server;
  url: string;
  port: number;
  /** Drains and releases everything; `lingerMs` first hands kept-alive connections back (lib/lifecycle.ts `linger`). */
  close(opts?: { lingerMs?: number }): Promise<void>;
  /** SIGHUP: re-reads PLATFORM_TRUSTED_ISSUERS_FILE (a bad file keeps the list in force). False when unchanged. */
  reloadTrustedIssuers(): Promise<boolean>;
  /** SIGHUP: re-reads PLATFORM_CONNECTIONS_FILE (a bad file keeps the connections in force). False when unchanged. */
  reloadConnections(): Promise<boolean>;
}

export interface IdpDeps {
  log: Logger;
  /** Defaults to Redis at config.redisUrl; `platform dev` passes its in-process store. */
  revocations?: RevocationPublisher;
  host?: string;
  /**
   * Wraps the provider's request handler before it listens. `platform dev` uses it to serve its stand-in
   * sign-in page (`/api/auth/*`) on the provider's own origin, where PLATFORM_LOGIN_URL points by default.
   */
  wrapHandler?: (idp: Handler) => Handler;
  /** Request, grant and rate-limit metrics; absent: nothing is recorded. */
  metrics?: IdpMetrics;
  /** In place of PLATFORM_CONNECTIONS_FILE's connections (a test's own, behind the exchange's seam). */
  connections?: ConnectionsService;
  /** OpenTelemetry traces (lib/telemetry/); absent: none. */
  tracing?: Tracing | undefined;
}

/**
 * The SQL type of the web application's users.id (serial integer in the Auth.js schema, text or uuid in
 * others), so the refresh path can compare against it with its index. Undefined when the table is absent.
 */
async function usersIdType(pool: Pool, table: string): Promise<string | undefined> {
  const { rows } = await pool.query<{ t: string | null }>(
    `SELECT format_type(a.atttypid, a.atttypmod) AS t FROM pg_attribute a
      WHERE a.attrelid = to_regclass($1) AND a.attname = 'id' AND NOT a.attisdropped`,
    [ident(table)],
  );
  const t = rows[0]?.t;
  return t && /^[a-z0-9 ()_,]+$/.test(t) ? t : undefined;
}

/** Writes the recorded, still-live revocations to the denylist; a failure is logged and retried next time. */
async function replayRevocations(revocation: RevocationService, log: Logger): Promise<void> {
  try {
    const n = await revocation.replay();
    log.info({ entries: n }, 'revocations replayed to the denylist');
  } catch (err) {
    log.warn({ err: { message: (err as Error).message } }, 'revocations could not be replayed yet');
  }
}

/** Redis answers a PING on the provider's own connection (offline, the queued PING times out: not ready). */
function redisCheck(redis: RedisClient): () => Promise<boolean> {
  return async () => redis.status === 'ready' && (await redis.ping()) === 'PONG';
}

export async function startIdp(config: IdpConfig, deps: IdpDeps): Promise<RunningIdp> {
  const { log } = deps;
  // One outbound-fetch budget for every fetch a request causes (idp/outbound): metadata documents, jwks_uri,
  // trusted issuers' key sets, upstream metadata.
  const outbound = createOutboundBudget();
  const trustedIssuers =
    config.trustedIssuersFile === undefined
      ? undefined
      : await TrustedIssuers.load(config.trustedIssuersFile, log, outbound).catch((err: Error) => {
          throw new ConfigError('PLATFORM_TRUSTED_ISSUERS_FILE', err.message);
        });
  const pool = createPool(config.databaseUrl, log, { max: 20, applicationName: 'platform-idp' });
  let redis: RedisClient | undefined;
  let revocations = deps.revocations;
  if (!revocations) {
    if (!config.redisUrl) throw new Error('REDIS_URL: is required');
    await checkRedisCredentials(config.redisUrl);
    redis = createRedisClient(config.redisUrl, {
      connectionName: 'idp',
      // Back on a promoted master within half a second of it being named: the replay that restores what the
      // failover lost waits for this reconnection.
      retryStrategy: (attempt: number) => Math.min(50 * attempt, 500),
      maxRetriesPerRequest: 2,
      enableOfflineQueue: true,
      lazyConnect: false,
      // Every token request checks its rate limit here: under load, one pipeline a turn for all of them.
      autoPipelining: true,
    });
    logRedisErrors(redis, log);
    revocations = new RedisRevocationPublisher(redis);
  }
  const metadataClients = createMetadataClients({
    allowedHosts: config.cimd.allowedHosts,
    ca: config.cimd.ca,
    pinned: config.cimd.pinned,
    budget: outbound,
    onFetched: (c) => log.info({ clientId: c.clientId, host: c.host }, 'client metadata document fetched'),
    onHostRefused: (host, detail) => log.warn({ host, detail }, 'client metadata document host refused'),
  });
  const clientKeys = createClientKeySets({
    allowedHosts: config.cimd.allowedHosts,
    ca: config.cimd.ca,
    budget: outbound,
    onHostRefused: (host, detail) => log.warn({ host, detail }, 'client jwks_uri host refused'),
  });
  const publisher = revocations;
  let keyRing: KeyRing | undefined;
  try {
    keyRing = await createKeyRing({ config, pool, redis, log: log.child({ component: 'keys' }) });
    // The secret the replicas share for the CSRF, sign-in-marker and DPoP-nonce keys. With rotation, the
    // key-encryption secret, under labels of its own: never a signing key, which an emergency rotation withdraws
    // as leaked while PLATFORM_OIDC_PRIVATE_KEY may stay mounted (whoever holds the leaked key could otherwise
    // make nonces ahead of time or forge those tokens). Static keys: the configured private key, as before.
    const shared = (label: string) =>
      config.keyRotation !== undefined
        ? deriveKey(config.keyRotation.encryptionKey, label)
        : createHmac('sha256', config.privateKey!).update(label).digest();
    const idType = await usersIdType(pool, config.authjs.usersTable);
    if (!idType)
      log.warn(
        { table: config.authjs.usersTable },
        'users table not found: deleted users are not detected on refresh',
      );
    const refreshTokens = createRefreshTokenStore(pool, {
      usersTable: idType ? { name: ident(config.authjs.usersTable), idType } : undefined,
      retrySeconds: config.refreshRetrySeconds,
      // Without PLATFORM_ROLES_SQL the entity grants are matched by email alone: read in the rotation itself.
      entityGrantsByEmail: config.rolesSql === undefined,
    });
    const revocation = createRevocationService({
      pool,
      publisher,
      log: log.child({ component: 'revocation' }),
      usersTable: idType ? ident(config.authjs.usersTable) : undefined,
      refreshTokens,
    });
    const limiter = createRateLimiter({
      issuer: config.issuer,
      limits: config.rateLimits,
      trustedProxies: config.trustedProxies,
      redis,
    });
    const roles = await createRoleSource(pool, config.rolesSql);
    const entitlements = createEntitlements({
      pool,
      config,
      roles,
      usersIdType: idType,
      revocation,
    });
    const ctx: IdpContext = {
      config,
      keyRing,
      clients: createClientStore(
        pool,
        metadataClients,
        config.gatewayClientSecret === undefined ? [] : [gatewayClient(config.gatewayClientSecret)],
      ),
      clientKeys,
      outbound,
      codes: createCodeStore(pool),
      consents: createConsentStore(pool),
      deviceCodes: createDeviceCodeStore(pool),
      refreshTokens,
      sessions: createSessionStore(pool, config.authjs),
      entitlements,
      entityGrants: createEntityGrants({ pool, max: config.entMax, roles, revocation }),
      revocations: publisher,
      revocation,
      adminAudit: createAdminAuditStore(pool),
      blocks: createBlockStore(pool),
      refusals: createRefusalStore(pool),
      rateLimiter: deps.metrics ? countingRefusals(limiter, deps.metrics) : limiter,
      pool,
      metrics: deps.metrics,
      trustedIssuers,
      connections:
        deps.connections ??
        (config.connections
          ? createConnections({
              pool,
              config,
              log: log.child({ component: 'connections' }),
              budget: { outbound, gate: countedFetches(limiter, undefined) },
              revocations: publisher,
            })
          : undefined),
      assertionJtis: redis ? new RedisSingleUseStore(redis) : new MemorySingleUseStore(),
      csrfKey: shared('platform-idp consent csrf v1'),
      readiness: {
        postgres: postgresCheck(pool),
        ...(redis && { redis: redisCheck(redis) }),
      },
      // Proofs seen: Redis (every replica) or, for the in-process stack of platform dev, this process's memory.
      // Nonces: keyed from the signing key, so every replica issues and accepts the same ones.
      dpop: createIdpDpop(
        config,
        redis ? new RedisDpopReplayStore(redis) : new MemoryDpopReplayStore(),
        shared('platform-idp dpop nonce v1'),
      ),
      adminDpop: createIdpDpop(
        config,
        new DatabaseDpopReplayStore(pool),
        shared('platform-idp dpop nonce v1'),
        'the database',
      ),
    };
    let restorer: ReturnType<typeof keepDenylistRestored> | undefined;
    if (redis) {
      // Redis may lose its data with or without the connection dropping (restarted, flushed, failed over): a
      // marker key checked every second says when to write the denylist again; at start-up, at every
      // (re)connection and at every failover (a Sentinel switching masters, a Cluster promoting a replica) it is
      // written whatever the marker says: a revocation the old master acknowledged may not have reached the
      // replica that took over (replication is asynchronous), and Postgres holds it (docs/operations.md).
      restorer = keepDenylistRestored({
        redis,
        issuer: config.issuer,
        replay: () => revocation.replay(),
        log,
      });
      const r = restorer;
      onFailover(redis, () => void r.check(true));
      if (redis.status === 'ready') await r.check(true);
    } else {
      // The in-process store starts empty on every start (platform dev): fill it before serving.
      await replayRevocations(revocation, log);
    }
    const idpHandler = deps.wrapHandler
      ? deps.wrapHandler(createIdpHandler(ctx, log, deps.tracing))
      : createIdpHandler(ctx, log, deps.tracing);
    const paths = new Set(routes(config).keys());
    const server = createServer(
      {
        // Slow senders, as at the gateway: the head within 10 s (Node answers 408 and closes), checked every
        // second rather than Node's default 30 s; a body within DEFAULT_BODY_TIMEOUT_MS of being read (lib/http.ts
        // readBody: 408, connection closed); requestTimeout is only the backstop over both.
        headersTimeout: 10_000,
        requestTimeout: 10_000 + DEFAULT_BODY_TIMEOUT_MS + 1000,
        connectionsCheckingInterval: 1000,
        maxHeaderSize: 16 * 1024,
      },
      closeUnreadBodies(
        withResponseHeaders(
          deps.metrics ? instrument(idpHandler, deps.metrics.http, idpRouteOf(paths)) : idpHandler,
        ),
      ),
    );
    server.keepAliveTimeout = 65_000;
    const addr = await listen(server, config.port, deps.host);
    const stopPurge = schedulePurge({ pool, log: log.child({ component: 'purge' }) });
    const ring = keyRing;
    log.info(
      {
        port: addr.port,
        issuer: config.issuer,
        kids: keyRing.published().map((k) => k.kid),
        signing: keyRing.signer().kid,
        keyRotation: keyRing.rotation ? 'auto' : 'off',
        entitlements: config.entitlements,
      },
      'idp listening',
    );
    return {
      server,
      port: addr.port,
      url: `http://127.0.0.1:${addr.port}`,
      reloadTrustedIssuers: async () => (await trustedIssuers?.reload()) ?? false,
      reloadConnections: async () => (await ctx.connections?.reload()) ?? false,
      async close(opts = {}) {
        stopPurge();
        restorer?.stop();
        ring.close();
        if (opts.lingerMs) await linger(server, opts.lingerMs);
        await drain(server);
        await metadataClients.close();
        await clientKeys.close();
        await pool.end();
        redis?.disconnect();
      },
    };
  } catch (err) {
    keyRing?.close();
    await metadataClients.close().catch(() => {});
    await clientKeys.close().catch(() => {});
    await pool.end().catch(() => {});
    redis?.disconnect();
    throw err;
  }
}
