import type { IncomingMessage } from 'node:http';
import { Counter } from 'prom-client';
import { createProcessMetrics, type ProcessMetrics } from '../lib/metrics.ts';
import type { RateLimitedEndpoint } from './config.ts';
import { RateLimitedError, type RateLimiter } from './rate-limit.ts';

/** The IdP's series beside the request metrics every process has. */
export interface IdpMetrics extends ProcessMetrics {
  /** Token-endpoint grants by `grant_type` and outcome (`ok` or the OAuth error code). */
  grants: Counter<'grant_type' | 'outcome'>;
  /** Rotated-out refresh tokens presented again (the family is revoked). */
  refreshReuse: Counter;
  /** Requests refused by the per-client rate limits, by endpoint. */
  rateLimited: Counter<'endpoint'>;
}

export function createIdpMetrics(): IdpMetrics {
  const base = createProcessMetrics('idp');
  const registers = [base.registry];
  return {
    ...base,
    grants: new Counter({
      name: 'platform_idp_grants_total',
      help: 'Token endpoint grants by grant_type and outcome (ok, or the OAuth error code)',
      labelNames: ['grant_type', 'outcome'] as const,
      registers,
    }),
    refreshReuse: new Counter({
      name: 'platform_idp_refresh_reuse_detected_total',
      help: 'Rotated-out refresh tokens presented again; each revoked its whole family',
      registers,
    }),
    rateLimited: new Counter({
      name: 'platform_idp_rate_limited_total',
      help: 'Requests refused with 429 by the per-client rate limits, by endpoint',
      labelNames: ['endpoint'] as const,
      registers,
    }),
  };
}

/** The route label: the route table's path when the request names one, else `other` (bounded). */
export function idpRouteOf(paths: ReadonlySet<string>): (req: IncomingMessage) => string {
  return (req) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    return paths.has(path) ? path : 'other';
  };
}

const GRANT_TYPES = new Set([
  'authorization_code',
  'refresh_token',
  'urn:ietf:params:oauth:grant-type:device_code',
  'client_credentials',
  'urn:ietf:params:oauth:grant-type:jwt-bearer',
  'urn:ietf:params:oauth:grant-type:token-exchange',
]);

/** A grant_type label from a client-supplied value: the known ones, else `other`. */
export function grantTypeLabel(value: string | undefined): string {
  return value !== undefined && GRANT_TYPES.has(value) ? value : 'other';
}

/** The rate limiter, with every refusal counted by endpoint. */
export function countingRefusals(limiter: RateLimiter, metrics: IdpMetrics): RateLimiter {
  const count = (endpoint: RateLimitedEndpoint) => (err: unknown) => {
    if (err instanceof RateLimitedError) metrics.rateLimited.inc({ endpoint });
    throw err;
  };
  return {
    consume: (endpoint, req) => limiter.consume(endpoint, req).catch(count(endpoint)),
    consumeKey: (endpoint, key) => limiter.consumeKey(endpoint, key).catch(count(endpoint)),
  };
}
