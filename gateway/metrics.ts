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
  /** MCP requests by service, method, tool and outcome (McpOperations below bounds the labels). */
  operations: McpOperations;
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
    operations: new McpOperations(
      new Histogram({
        name: 'mcp_server_operation_duration_seconds',
        help: "MCP requests through the gateway, from arrival to the end of the answer, by service, JSON-RPC method, tool (tools/call; named by the upstream's tools/list, else other) and outcome (ok, refused, rate_limited, error)",
        labelNames: ['service', 'method', 'tool', 'outcome'] as const,
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
        registers,
      }),
    ),
  };
}

/** The JSON-RPC methods of MCP (2025-06-18 … 2026-07-28) that get a label of their own; any other: `other`. */
const MCP_METHODS: ReadonlySet<string> = new Set([
  'initialize',
  'ping',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/read',
  'resources/templates/list',
  'resources/subscribe',
  'resources/unsubscribe',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
  'notifications/roots/list_changed',
]);
/** Tool names remembered per service at most (a misbehaving upstream cannot grow the series without bound). */
const MAX_TOOLS_PER_SERVICE = 500;

/**
 * `mcp_server_operation_duration_seconds` with bounded labels: the method from MCP's list, the tool only when
 * the service's upstream has named it in a tools/list answer (learnt as those answers pass), else `other`.
 */
export class McpOperations {
  readonly #histogram: Histogram<'service' | 'method' | 'tool' | 'outcome'>;
  readonly #tools = new Map<string, Set<string>>();

  constructor(histogram: Histogram<'service' | 'method' | 'tool' | 'outcome'>) {
    this.#histogram = histogram;
  }

  /** Remembers a tool the service's upstream listed. */
  learn(service: string, tool: string): void {
    let names = this.#tools.get(service);
    if (names === undefined) {
      names = new Set();
      this.#tools.set(service, names);
    }
    if (names.size < MAX_TOOLS_PER_SERVICE) names.add(tool);
  }

  observe(service: string, method: string, tool: string | undefined, status: number, seconds: number): void {
    const m = MCP_METHODS.has(method) ? method : 'other';
    const t = tool === undefined ? '' : this.#tools.get(service)?.has(tool) ? tool : 'other';
    const outcome =
      status < 400 ? 'ok' : status === 429 ? 'rate_limited' : status < 500 ? 'refused' : 'error';
    this.#histogram.observe({ service, method: m, tool: t, outcome }, seconds);
  }
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
