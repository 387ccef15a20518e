import type { IncomingMessage } from 'node:http';
import { Counter, Histogram } from 'prom-client';
import { createProcessMetrics, type ProcessMetrics } from '../lib/metrics.ts';
import type { RevocationEvent } from '../lib/revocation.ts';

/** The gateway's series beside the request metrics every process has. */
export interface GatewayMetrics extends ProcessMetrics {
  jwksFetches: Counter<'issuer' | 'outcome'>;
  revocationEvents: Counter<'kind'>;
  /** Seconds from a subject/email cut-off to this gateway applying it (the events carry no finer clock). */
  revocationLag: Histogram;
}

export function createGatewayMetrics(): GatewayMetrics {
  const base = createProcessMetrics('gateway');
  const registers = [base.registry];
  return {
    ...base,
    jwksFetches: new Counter({
      name: 'platform_gateway_jwks_fetches_total',
      help: 'Key-set (JWKS) HTTP fetches by issuer and outcome (ok, failed)',
      labelNames: ['issuer', 'outcome'] as const,
      registers,
    }),
    revocationEvents: new Counter({
      name: 'platform_gateway_revocation_events_total',
      help: 'Revocation events applied to the in-memory mirror, by kind (jti, sub, email)',
      labelNames: ['kind'] as const,
      registers,
    }),
    revocationLag: new Histogram({
      name: 'platform_gateway_revocation_mirror_lag_seconds',
      help: 'Time from a revocation cut-off to the mirror applying it (whole-second cut-offs: ±1 s)',
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      registers,
    }),
  };
}

export function recordRevocation(m: GatewayMetrics, event: RevocationEvent, nowMs = Date.now()): void {
  const kind = 'jti' in event ? 'jti' : 'sub' in event ? 'sub' : 'email';
  m.revocationEvents.inc({ kind });
  if ('cutoff' in event) m.revocationLag.observe(Math.max(0, nowMs / 1000 - event.cutoff));
}

/**
 * The route label: the service a path belongs to (`<service>`), or `health`, or `other`. Bounded by the
 * configured services, whatever paths clients send.
 */
export function gatewayRouteOf(services: ReadonlySet<string>): (req: IncomingMessage) => string {
  return (req) => {
    const url = req.url ?? '/';
    if (url === '/health' || url.startsWith('/health/')) return 'health';
    const end = url.indexOf('/', 1);
    const first = end === -1 ? url.slice(1).split('?')[0]! : url.slice(1, end);
    return services.has(first) ? first : 'other';
  };
}
