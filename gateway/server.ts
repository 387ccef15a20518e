import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import { ConfigError } from '../lib/config.ts';
import { DpopNonces, type DpopReplayStore, MemoryDpopReplayStore } from '../lib/dpop/index.ts';
import type { ReadinessChecks } from '../lib/health.ts';
import { drain, linger, listen } from '../lib/lifecycle.ts';
import type { Logger } from '../lib/logger.ts';
import { instrument } from '../lib/metrics.ts';
import type { RedisClient } from '../lib/redis/client.ts';
import { checkRedisCredentials } from '../lib/redis-auth.ts';
import type { ConnectionDropped, MemoryRevocations, RevocationEvent } from '../lib/revocation.ts';
import type { Tracing } from '../lib/telemetry/index.ts';
import { createGatewayHandler } from './app.ts';
import { TokenCache } from './auth/token-cache.ts';
import { createTokenVerifier } from './auth/verify-token.ts';
import type { GatewayConfig } from './config.ts';
import { createDpopCheck } from './dpop/check.ts';
import { gatewayReplayStore } from './dpop/replay.ts';
import { JwksHttpClient } from './jwks/http-client.ts';
import { discoveredJwksUrl, KeySet } from './jwks/key-set.ts';
import { listenForKeyNotices } from './jwks/notices.ts';
import { JwksCacheCodec, type JwksStore, RedisJwksStore } from './jwks/store.ts';
import { createGatewayLimits } from './limits/limits.ts';
import { type GatewayMetrics, gatewayRouteOf, recordRevocation } from './metrics.ts';
import { PolicyFile } from './policy/gate.ts';
import { PolicyFileError } from './policy/load.ts';
import { createBodyReader } from './proxy/body.ts';
import { createUpstream, type Upstream } from './proxy/forward.ts';
import { createRedisClients, type RedisClients, RedisOutage } from './redis.ts';
import { memoryRevocationCheck, type RevocationCheck, RevocationMirror } from './revocation/mirror.ts';
import { type RevocationSync, startRevocationSync } from './revocation/redis-sync.ts';
import { createTokenExchange } from './upstream-auth/exchange.ts';
import { UpstreamTokenCache } from './upstream-auth/token-cache.ts';
import { createUpstreamCredentials } from './upstream-auth/upstream-credentials.ts';

export interface GatewayDeps {
  log: Logger;
  /**
   * `platform dev`: the in-process revocation store shared with the IdP. When given, the gateway uses no
   * Redis at all (revocations read from it, key sets cached in memory only).
   */
  revocations?: MemoryRevocations;
  host?: string;
  /** Request, key-set and revocation metrics; absent: nothing is recorded (tests, `platform dev`). */
  metrics?: GatewayMetrics;
  /** OpenTelemetry traces (lib/telemetry/); absent: none. */
  tracing?: Tracing | undefined;
}

export interface RunningGateway {
  url: string;
  port: number;
  /** SIGHUP: re-reads GATEWAY_POLICY_FILE; a bad file keeps the rules in force. False when nothing changed. */
  reloadPolicy(): Promise<boolean>;
  /**
   * Drains and releases everything. `lingerMs` (the process's SIGTERM path) first hands the kept-alive
   * connections back to the proxy in front (lib/lifecycle.ts `linger`), so a replica stopped under load fails
   * none of the requests the proxy sends it meanwhile.
   */
  close(opts?: { lingerMs?: number }): Promise<void>;
}

/** The policy file, loaded before anything else starts: a bad one stops start-up with one line naming it. */
async function loadPolicy(
  config: GatewayConfig,
  log: Logger,
  redis: () => RedisClient | undefined,
): Promise<PolicyFile | undefined> {
  if (config.policyFile === undefined) return undefined;
  const services = config.services.map((s) => s.name);
  try {
    return await PolicyFile.load({
      path: config.policyFile,
      services,
      log,
      // Counted in Redis across the replicas (in this process for `platform dev`, which has no Redis).
      limits: (limits) => createGatewayLimits(limits, { services, redis, log }),
    });
  } catch (err) {
    if (err instanceof PolicyFileError)
      throw new ConfigError('GATEWAY_POLICY_FILE', `${config.policyFile}: ${err.message}`);
    throw err;
  }
}

/** How long start-up waits for the revocation mirror before listening anyway (Redis down must not stop us). */
const MIRROR_STARTUP_WAIT_MS = 3000;
/** The label the DPoP nonce key is derived from GATEWAY_IDENTITY_SECRET under. */
const DPOP_NONCE_LABEL = 'platform-gateway-dpop-nonce-v1';

export async function startGateway(config: GatewayConfig, deps: GatewayDeps): Promise<RunningGateway> {
  const { log, metrics } = deps;
  let redis: RedisClients | undefined;
  // Read before anything else starts (a bad file stops start-up before Redis is dialled); its limits find the
  // Redis client when they first count.
  const policy = await loadPolicy(config, log, () => redis?.cmd);
  const http = new JwksHttpClient();
  let sync: RevocationSync | undefined;
  let store: JwksStore | undefined;
  let revocation: RevocationCheck;
  let replay: DpopReplayStore;
  // The users' upstream tokens, dropped as their revocations arrive (and never served past a cut-off anyway).
  const upstreamTokens = config.exchange && new UpstreamTokenCache();
  const onRevocationEvent = (event: RevocationEvent) => {
    upstreamTokens?.revoked(event);
    if (metrics) recordRevocation(metrics, event);
  };
  // A user's disconnect at the IdP: their cached token of that connection is not served again.
  const onConnectionDropped = (event: ConnectionDropped) => upstreamTokens?.disconnected(event);
  if (deps.revocations) {
    revocation = memoryRevocationCheck(deps.revocations);
    if (upstreamTokens) {
      deps.revocations.on('revocation', onRevocationEvent);
      deps.revocations.on('connection-dropped', onConnectionDropped);
    }
    replay = new MemoryDpopReplayStore();
  } else {
    if (config.redisUrl === undefined) throw new ConfigError('REDIS_URL', 'is required');
    // Credentials Redis refuses stop start-up (exit 2); Redis merely unreachable does not.
    await checkRedisCredentials(config.redisUrl);
    redis = createRedisClients(
      config.redisUrl,
      new RedisOutage(log, { revocationMode: config.revocationMode }),
    );
    // Redis is not trusted with keys: a shared key set counts only with its tag (jwks/store.ts).
    store = new RedisJwksStore(redis.cmd, new JwksCacheCodec(config.identitySecret), (issuer, detail) =>
      log.warn({ issuer, problem: detail }, 'shared key set in redis ignored; fetching it from the issuer'),
    );
    const mirror = new RevocationMirror(config.revocationMode);
    sync = startRevocationSync(
      mirror,
      redis,
      log,
      upstreamTokens || metrics ? onRevocationEvent : undefined,
      onConnectionDropped,
    );
    revocation = mirror;
    replay = gatewayReplayStore(redis.cmd, config.revocationMode);
  }
  // Nonces are an HMAC under a key every replica derives alike (its own label, none of the identity keys).
  const dpop = createDpopCheck({
    publicBaseUrl: config.publicBaseUrl.replace(/\/$/, ''),
    replay,
    nonces: config.dpopNonce
      ? new DpopNonces(createHmac('sha256', config.identitySecret).update(DPOP_NONCE_LABEL).digest())
      : undefined,
  });

  const cache = new TokenCache(config.tokenCacheSize);
  const keySet = (issuer: string, resolveUrl: () => Promise<string>) =>
    new KeySet({
      issuer,
      resolveUrl,
      http,
      store,
      cooldownMs: config.jwksCooldownMs,
      log,
      onKeysRemoved: () => cache.clear(),
      onFetch: metrics && ((outcome) => metrics.jwksFetches.inc({ issuer, outcome })),
    });
  const { platform, entra } = config;
  const platformKeys =
    platform &&
    keySet(
      platform.issuer,
      platform.jwksUrl !== undefined
        ? async () => platform.jwksUrl!
        : discoveredJwksUrl(platform.issuer, http),
    );
  // An emergency rotation at the IdP withdraws keys at once (docs/gateway.md § Key sets).
  const stopKeyNotices = platformKeys && redis && listenForKeyNotices(redis.sub, platformKeys, log);
  const entraKeys = entra && {
    v2: keySet(entra.v2Issuer, async () => entra.v2JwksUrl),
    v1: keySet(entra.v1Issuer, async () => entra.v1JwksUrl),
  };
  const verify = createTokenVerifier({
    cache,
    platform: platform && {
      trust: platform,
      keys: platformKeys!,
    },
    entra: entra && {
      trust: entra,
      v2Keys: entraKeys!.v2,
      v1Keys: entraKeys!.v1,
    },
  });

  const upstreams = new Map<string, Upstream>(
    config.services.map((s) => [s.name, createUpstream(config, s)]),
  );
  // Readiness (lib/health.ts): every trusted issuer's key set obtained once (a later fetch failure keeps the
  // last good keys, so it stays ready), and the revocation mirror in sync with Redis.
  const keySets = [platformKeys, entraKeys?.v2, entraKeys?.v1].filter((k) => k !== undefined);
  const readiness: ReadinessChecks = {
    ...(sync && { redis: () => revocation.current !== false }),
    ...(keySets.length > 0 && {
      jwks: async () => (await Promise.all(keySets.map((k) => k.ensureLoaded()))).every(Boolean),
    }),
  };
  const bodies = createBodyReader({ maxBytes: config.maxBodyBytes, timeoutMs: config.bodyTimeoutMs });
  const exchanger = config.exchange && createTokenExchange(config.exchange, log);
  const upstreamAuth =
    exchanger &&
    upstreamTokens &&
    createUpstreamCredentials({
      exchange: exchanger.exchange,
      cache: upstreamTokens,
      revocation,
      issuer: config.platform!.issuer,
      log,
    });
  const gatewayHandler = createGatewayHandler({
    config,
    verify,
    dpop,
    revocation,
    upstreams,
    bodies,
    policy,
    upstreamAuth,
    readiness,
    tracing: deps.tracing,
    operations: metrics?.operations,
    log,
  });
  // Per request: one counter increment and one histogram observation (docs/deploy.md § Metrics has the cost).
  const handler = metrics
    ? instrument(gatewayHandler, metrics.http, gatewayRouteOf(new Set(config.services.map((s) => s.name))))
    : gatewayHandler;
  const server = createServer(
    {
      maxHeaderSize: config.maxHeaderBytes,
      // Slow senders: the head within GATEWAY_HEADERS_TIMEOUT_MS (Node answers 408 and closes), checked every
      // second rather than Node's default 30 s. A body has its own bound (proxy/body.ts), and a request refused
      // before its body is read is closed at once (respond.ts); requestTimeout is only the backstop over both,
      // with room for a key-set fetch (12 s at most) between head and body.
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.headersTimeoutMs + 12_000 + config.bodyTimeoutMs + 1000,
      connectionsCheckingInterval: 1000,
      // Longer than a load balancer's idle timeout (60 s), so the balancer closes idle connections first.
      keepAliveTimeout: 65_000,
      noDelay: true,
    },
    handler,
  );

  const release = async () => {
    sync?.stop();
    stopKeyNotices?.();
    bodies.close();
    if (upstreamTokens && deps.revocations) {
      deps.revocations.off('revocation', onRevocationEvent);
      deps.revocations.off('connection-dropped', onConnectionDropped);
    }
    upstreamTokens?.clear();
    await Promise.all([...upstreams.values()].map((u) => u.close()));
    await exchanger?.close();
    await redis?.close();
    await http.close();
  };
  try {
    if (sync && !(await sync.ready(MIRROR_STARTUP_WAIT_MS))) {
      log.warn(
        { revocationMode: config.revocationMode },
        'listening before the revocation mirror is in sync with redis',
      );
    }
    const addr = await listen(server, config.port, deps.host);
    log.info(
      {
        port: addr.port,
        services: config.services.map((s) => ({
          name: s.name,
          upstreams: s.upstreamOrigins.map((o) => o + s.upstreamBasePath),
          ...(s.upstreamKind === 'remote' ? { kind: 'remote' } : {}),
          ...(s.upstreamConnection ? { connection: s.upstreamConnection } : {}),
        })),
        platformIssuer: platform?.issuer,
        entraTenant: entra?.tenantId,
        revocationMode: deps.revocations ? 'in-process' : config.revocationMode,
        policyRules: policy?.current.ruleCount,
      },
      'gateway listening',
    );
    return {
      url: `http://127.0.0.1:${addr.port}`,
      port: addr.port,
      async reloadPolicy() {
        if (policy === undefined) {
          log.info('no GATEWAY_POLICY_FILE: no policy to reload');
          return false;
        }
        return policy.reload();
      },
      async close(opts = {}) {
        if (opts.lingerMs) await linger(server, opts.lingerMs);
        await drain(server, config.shutdownGraceMs);
        await release();
      },
    };
  } catch (err) {
    await release();
    throw err;
  }
}
