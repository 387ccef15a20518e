import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import type { RedisClient } from '../lib/redis/client.ts';
import type { RateLimitedEndpoint, RateLimits } from './config.ts';
import { OAuthError } from './errors.ts';

export const RATE_LIMIT_PREFIX = 'platform:ratelimit';

const REFUSALS: Partial<Record<RateLimitedEndpoint, string>> = {
  // Every outbound fetch counts here (idp/outbound): metadata documents, jwks_uri, trusted issuers' key sets.
  cimd: 'too many client metadata documents or key sets were fetched for this address; retry later',
  cimd_host: 'too many client metadata documents or key sets were fetched from this host; retry later',
};

/** 429 with Retry-After (whole seconds, at least 1). */
export class RateLimitedError extends OAuthError {
  readonly retryAfter: number;
  constructor(endpoint: RateLimitedEndpoint, retryAfter: number) {
    super(
      'temporarily_unavailable',
      REFUSALS[endpoint] ?? `too many ${endpoint} requests from this address; retry later`,
      429,
    );
    this.retryAfter = retryAfter;
  }
}

export interface RateLimiter {
  /** Counts one request of `endpoint` from the request's client address; throws RateLimitedError beyond it. */
  consume(endpoint: RateLimitedEndpoint, req: IncomingMessage): Promise<void>;
  /** Counts one request of `endpoint` against another key than the address (a metadata document's host). */
  consumeKey(endpoint: RateLimitedEndpoint, key: string): Promise<void>;
}

export interface RateLimiterOptions {
  /** Counters are per issuer: replicas of one provider share them, other deployments on the same Redis do not. */
  issuer: string;
  limits: RateLimits;
  trustedProxies: readonly string[];
  /** Shared by every replica when given; else counted in this process (the dev stack). */
  redis?: RedisClient;
  /** Metrics hook: called once per refused request. */
  onRefused?: (endpoint: RateLimitedEndpoint) => void;
}

export function createRateLimiter(o: RateLimiterOptions): RateLimiter {
  const trusted = trustedList(o.trustedProxies);
  const limiters = new Map<RateLimitedEndpoint, RateLimiterAbstract>();
  for (const [endpoint, { points, seconds }] of Object.entries(o.limits) as Array<
    [RateLimitedEndpoint, { points: number; seconds: number }]
  >) {
    const keyPrefix = `${RATE_LIMIT_PREFIX}:${o.issuer}:${endpoint}`;
    const memory = new RateLimiterMemory({ points, duration: seconds, keyPrefix });
    limiters.set(
      endpoint,
      o.redis
        ? new RateLimiterRedis({
            storeClient: o.redis,
            points,
            duration: seconds,
            keyPrefix,
            // Redis unreachable: count in this process rather than refuse everyone or wait on a queue.
            rejectIfRedisNotReady: true,
            insuranceLimiter: memory,
          })
        : memory,
    );
  }
  async function consumeKey(endpoint: RateLimitedEndpoint, key: string): Promise<void> {
    const limiter = limiters.get(endpoint)!;
    try {
      await limiter.consume(key, 1);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      o.onRefused?.(endpoint);
      throw new RateLimitedError(endpoint, Math.max(1, Math.ceil(err.msBeforeNext / 1000)));
    }
  }
  return {
    consume: (endpoint, req) => consumeKey(endpoint, clientAddress(req, trusted)),
    consumeKey,
  };
}

function trustedList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const e of entries) {
    const [addr, bits] = e.split('/') as [string, string | undefined];
    const family = isIP(addr) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(addr, family);
    else list.addSubnet(addr, Number(bits), family);
  }
  return list;
}

function plain(address: string): string {
  // An IPv4 peer on a dual-stack socket reads as ::ffff:a.b.c.d.
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

function isTrusted(list: BlockList, address: string): boolean {
  const family = isIP(address);
  return family !== 0 && list.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

/**
 * The client's address: the peer, unless the peer is a trusted proxy; then X-Forwarded-For read from the
 * right (the hop the nearest proxy saw), skipping further trusted proxies. Entries to the left of the first
 * untrusted hop were written by the client and are never believed.
 */
export function clientAddress(req: IncomingMessage, trusted: BlockList): string {
  let address = plain(req.socket.remoteAddress ?? 'unknown');
  if (!isTrusted(trusted, address)) return address;
  const header = req.headers['x-forwarded-for'];
  const hops = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((h) => plain(h.trim()))
    .filter((h) => h !== '');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    if (isIP(hop) === 0) break;
    address = hop;
    if (!isTrusted(trusted, hop)) break;
  }
  return address;
}
