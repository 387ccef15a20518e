import { createHash } from 'node:crypto';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import type { Logger } from '../../lib/logger.ts';
import type { RedisClient } from '../../lib/redis/client.ts';
import type { VerifiedToken } from '../auth/verified-token.ts';
import { RateLimitedError } from '../errors.ts';
import type { RpcCall } from '../policy/rpc.ts';
import type { Limit } from '../policy/schema.ts';

// The policy file's `limits:` on the request path. Each limit counts, per caller (its email, or its token's
// client_id/azp), the requests to its services (every request; with `tool`, each tools/call of a named tool),
// in a fixed window of `rate`'s seconds, in Redis so that every replica counts into the same counter. While
// Redis does not answer, each replica counts on its own in memory (rate-limiter-flexible's insurance limiter):
// traffic goes on, limited per replica, rather than stopping or going unlimited.
//
// Far below a limit, a replica does not ask Redis for every request: it takes points ahead (a lease) and spends
// them in memory, so a limit nobody comes near costs one Redis round trip per LEASE_MAX requests of a caller, not
// one per request (docs/performance.md § Rate limits). A lease is counted in Redis when taken, so the replicas
// together never admit more than the limit; what a replica leased and did not spend by the end of the window is
// lost, which can only make a limit bite early, by at most LEASE_MAX points per replica, and never when the limit
// is near: a lease is at most 1/LEASE_SHARE of what the last answer said remains, so under LEASE_SHARE points
// left every request asks Redis, exactly as without leases.

/** Redis keys of the gateway's counters (the IdP's own are under platform:ratelimit:, out of the gateway's reach). */
export const LIMIT_KEY_PREFIX = 'platform:limits';

export interface GatewayLimits {
  readonly count: number;
  /**
   * Counts the request against every limit that applies to it; undefined when none does (nothing to wait for),
   * else a promise that rejects with RateLimitedError beyond a limit. `calls` is only asked for when a limit
   * names tools.
   */
  check(service: string, calls: () => readonly RpcCall[], caller: VerifiedToken): Promise<void> | undefined;
}

interface CompiledLimit {
  /** 1-based position in `limits:`, the policy's name in the RateLimit headers. */
  readonly position: number;
  readonly tools: ReadonlySet<string> | undefined;
  readonly per: Limit['per'];
  readonly count: number;
  readonly seconds: number;
  /** Made when the limit first counts. */
  limiter: () => RateLimiterAbstract;
  /** Points taken ahead, per caller (the counter's key), in the current window. */
  readonly leases: Map<string, Lease>;
}

/** Points a replica took from the shared counter ahead of use, for one caller of one limit. */
interface Lease {
  /** Taken and not spent yet. */
  points: number;
  /** When the counter's window ends (ms since the epoch): the lease's points are gone with it. */
  until: number;
  /** What the counter's last answer said remained. */
  remaining: number;
  /** A lease being taken: requests meanwhile wait for it rather than each taking one. */
  taking: Promise<void> | undefined;
}

/** Most points taken ahead at once, and the share of what remains a lease may take. */
export const LEASE_MAX = 64;
export const LEASE_SHARE = 16;
/** Callers whose leases one limit keeps before the expired ones are dropped. */
const LEASES_KEPT = 4096;

export interface LimitsOptions {
  services: readonly string[];
  /** Told (once a minute at most) when Redis refuses the counting itself, e.g. a Redis user without its rights. */
  log?: Logger | undefined;
  /**
   * Shared by the replicas; undefined (`platform dev`): counted in this process only. Asked when a limit first
   * counts (the policy file is read before Redis is dialled).
   */
  redis: () => RedisClient | undefined;
}

export function createGatewayLimits(limits: readonly Limit[], o: LimitsOptions): GatewayLimits {
  const byService = new Map<string, CompiledLimit[]>();
  limits.forEach((limit, i) => {
    const compiled = compileLimit(limit, i + 1, o.redis, o.log);
    const services = limit.service === undefined ? o.services : list(limit.service);
    for (const s of services) {
      const l = byService.get(s);
      if (l === undefined) byService.set(s, [compiled]);
      else l.push(compiled);
    }
  });
  return {
    count: limits.length,
    check(service, calls, caller) {
      const applying = byService.get(service);
      if (applying === undefined) return undefined;
      let pending: Promise<void>[] | undefined;
      for (const l of applying) {
        let points = 1;
        if (l.tools !== undefined) {
          points = 0;
          for (const c of calls()) if (c.method === 'tools/call' && c.tool && l.tools.has(c.tool)) points++;
          if (points === 0) continue;
        }
        const key = keyOf(l.per, caller);
        if (spend(l.leases.get(key), points)) continue;
        pending ??= [];
        pending.push(consume(l, key, points));
      }
      if (pending === undefined) return undefined;
      return pending.length === 1 ? pending[0] : Promise.all(pending).then(() => undefined);
    },
  };
}

/** The counter's key: the caller's email or client; a token without one is counted by its subject. */
function keyOf(per: Limit['per'], t: VerifiedToken): string {
  const value = per === 'email' ? t.email.toLowerCase() : t.clientId;
  return value === '' ? `${t.kind}-sub:${t.sub}` : value;
}

/** Spends `points` of a lease still in its window; false when it holds too few (Redis is asked). */
function spend(lease: Lease | undefined, points: number): boolean {
  if (lease === undefined || lease.points < points || lease.until <= Date.now()) return false;
  lease.points -= points;
  return true;
}

/**
 * Counts `points` in the shared counter, taking a lease ahead when far enough below the limit. A request that
 * finds a lease being taken waits for it and spends from it if it can.
 */
async function consume(l: CompiledLimit, key: string, points: number): Promise<void> {
  for (;;) {
    const taking = l.leases.get(key)?.taking;
    if (taking === undefined) break;
    await taking;
    if (spend(l.leases.get(key), points)) return;
  }
  const lease = l.leases.get(key);
  const live = lease !== undefined && lease.until > Date.now();
  const ahead = live ? Math.min(LEASE_MAX, Math.floor(lease.remaining / LEASE_SHARE)) : 0;
  const taking = take(l, key, points, ahead, live ? lease.points : 0);
  if (ahead > 0) {
    const done = taking.then(
      () => undefined,
      () => undefined,
    );
    if (lease) lease.taking = done;
  }
  await taking;
}

async function take(
  l: CompiledLimit,
  key: string,
  points: number,
  ahead: number,
  left: number,
): Promise<void> {
  const limiter = l.limiter();
  let res: RateLimiterRes;
  try {
    res = await limiter.consume(key, points + ahead);
  } catch (refused) {
    if (!(refused instanceof RateLimiterRes)) throw refused;
    res = refused;
    // The lease did not fit: give it back, and the request is counted as if it had asked for its own points.
    if (ahead > 0) await limiter.reward(key, ahead).catch(() => undefined);
    if (ahead === 0 || res.consumedPoints - ahead > l.count) {
      remember(l, key, 0, res, 0);
      throw limitedError(l, res);
    }
    remember(l, key, left, res, ahead);
    return;
  }
  remember(l, key, left + ahead, res, 0);
}

/** What the counter said, kept for the next request of this caller (and the lease's points, `given` back). */
function remember(l: CompiledLimit, key: string, points: number, res: RateLimiterRes, given: number): void {
  if (l.leases.size >= LEASES_KEPT && !l.leases.has(key)) {
    const now = Date.now();
    for (const [k, v] of l.leases) if (v.until <= now && v.taking === undefined) l.leases.delete(k);
    if (l.leases.size >= LEASES_KEPT) l.leases.delete(l.leases.keys().next().value!);
  }
  l.leases.set(key, {
    points,
    until: Date.now() + res.msBeforeNext,
    remaining: Math.max(0, res.remainingPoints + given),
    taking: undefined,
  });
}

function limitedError(l: CompiledLimit, res: RateLimiterRes): RateLimitedError {
  const seconds = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  return new RateLimitedError({
    policy: `limit-${l.position}`,
    quota: l.count,
    window: l.seconds,
    remaining: Math.max(0, res.remainingPoints),
    resetSeconds: seconds,
    per: l.per,
  });
}

/** How often a refused counting command is logged at most. */
const REFUSAL_LOG_INTERVAL_MS = 60_000;
let lastRefusalLogged = 0;

/**
 * rate-limiter-flexible falls back to the insurance limiter on any store error without a word: a Redis that is
 * merely away is expected (the outage itself is logged by the connection), but one that refuses the commands (an
 * ACL without them, a read-only replica) would leave the limits per replica unnoticed.
 */
class LoggingRedisLimiter extends RateLimiterRedis {
  readonly #log: Logger | undefined;
  constructor(opts: ConstructorParameters<typeof RateLimiterRedis>[0], log: Logger | undefined) {
    super(opts);
    this.#log = log;
  }
  _handleError(err: unknown, funcName: string, resolve: unknown, reject: unknown, params: unknown): void {
    if (
      this.#log &&
      err instanceof Error &&
      err.message !== 'Redis connection is not ready' &&
      Date.now() - lastRefusalLogged > REFUSAL_LOG_INTERVAL_MS
    ) {
      lastRefusalLogged = Date.now();
      this.#log.warn(
        { err: { message: err.message } },
        'rate limits counted per replica: redis refused the counting command',
      );
    }
    // biome-ignore lint/suspicious/noExplicitAny: the library's own (untyped) method
    (RateLimiterRedis.prototype as any)._handleError.call(this, err, funcName, resolve, reject, params);
  }
}

function compileLimit(
  limit: Limit,
  position: number,
  redisOf: () => RedisClient | undefined,
  log: Logger | undefined,
): CompiledLimit {
  const { count, seconds } = limit.rate;
  // The same limit on every replica and across reloads names the same counters; a changed limit starts afresh.
  const id = createHash('sha256')
    .update(JSON.stringify([list(limit.service), list(limit.tool), limit.per, count, seconds]))
    .digest('hex')
    .slice(0, 16);
  const keyPrefix = `${LIMIT_KEY_PREFIX}:${id}`;
  let limiter: RateLimiterAbstract | undefined;
  const make = (): RateLimiterAbstract => {
    const memory = new RateLimiterMemory({ points: count, duration: seconds, keyPrefix });
    const redis = redisOf();
    return redis
      ? new LoggingRedisLimiter(
          {
            storeClient: redis,
            points: count,
            duration: seconds,
            keyPrefix,
            // Redis unreachable: counted in this replica's memory at once, never queued behind the outage.
            rejectIfRedisNotReady: true,
            insuranceLimiter: memory,
          },
          log,
        )
      : memory;
  };
  return {
    position,
    tools: limit.tool === undefined ? undefined : new Set(list(limit.tool)),
    per: limit.per,
    count,
    seconds,
    limiter: () => (limiter ??= make()),
    leases: new Map(),
  };
}

function list<T>(v: T | readonly T[] | undefined): readonly T[] {
  return v === undefined ? [] : Array.isArray(v) ? v : [v as T];
}
