import type { IncomingMessage } from 'node:http';
import { Counter, Gauge } from 'prom-client';
import { createProcessMetrics, type ProcessMetrics } from '../../lib/metrics.ts';

/**
 * The five monitors the resource-server contract asks for in the first 24 hours after a deployment, as the
 * tool servers record them (alert rules: deploy/prometheus/alerts.yaml):
 * - idempotency violations: proposals written twice under one idempotency key in the last 24 h (a duplicate
 *   ledger row), counted from the audit table by the deals server;
 * - fragile citation rate: citations written, by kind (durable, fragile); the rate is fragile / all;
 * - unresolved conflicts: cross-source metric conflicts recorded in the last 24 h (none resolves itself);
 * - degrade events: tool calls that degraded because a dependency (database, Graph) was down;
 * - deserialization failures: stored artifacts that could not be read back.
 */
export interface ToolMonitors {
  degraded(dependency: string): void;
  deserializationFailed(): void;
  citationsWritten(durable: number, fragile: number): void;
  /** The audit counts of the last 24 h (the deals server refreshes them periodically). */
  auditCounts(counts: { idempotencyViolations: number; unresolvedConflicts: number }): void;
}

export interface ToolMetrics extends ProcessMetrics {
  monitors: ToolMonitors;
}

export function createToolMetrics(service: string): ToolMetrics {
  const base = createProcessMetrics(`tool-${service}`);
  const registers = [base.registry];
  const degrade = new Counter({
    name: 'platform_monitor_degrade_events_total',
    help: 'Tool calls that degraded (answered a dependency_unavailable error) because a dependency was down',
    labelNames: ['dependency'] as const,
    registers,
  });
  const deserialization = new Counter({
    name: 'platform_monitor_deserialization_failures_total',
    help: 'Stored artifacts that could not be deserialized (unknown schema_version or malformed body)',
    registers,
  });
  const citations = new Counter({
    name: 'platform_monitor_citations_total',
    help: 'Citations written with proposals, by kind (durable, fragile); fragile / all is the fragile rate',
    labelNames: ['kind'] as const,
    registers,
  });
  const violations = new Gauge({
    name: 'platform_monitor_idempotency_violations',
    help: 'Idempotency keys with more than one proposal written in the last 24 h (duplicate ledger rows)',
    registers,
  });
  const conflicts = new Gauge({
    name: 'platform_monitor_unresolved_conflicts',
    help: 'Cross-source metric conflicts recorded in the last 24 h (none is resolved automatically)',
    registers,
  });
  // Every series exists from the start (at 0), so "no data" never hides a monitor from its alert.
  degrade.inc({ dependency: 'database' }, 0);
  citations.inc({ kind: 'durable' }, 0);
  citations.inc({ kind: 'fragile' }, 0);
  return {
    ...base,
    monitors: {
      degraded: (dependency) => degrade.inc({ dependency }),
      deserializationFailed: () => deserialization.inc(),
      citationsWritten(durable, fragile) {
        if (durable > 0) citations.inc({ kind: 'durable' }, durable);
        if (fragile > 0) citations.inc({ kind: 'fragile' }, fragile);
      },
      auditCounts(c) {
        violations.set(c.idempotencyViolations);
        conflicts.set(c.unresolvedConflicts);
      },
    },
  };
}

/** Monitors that record nothing (no METRICS_PORT, tests, `platform dev`). */
export const NO_MONITORS: ToolMonitors = {
  degraded() {},
  deserializationFailed() {},
  citationsWritten() {},
  auditCounts() {},
};

/** The route label: `mcp`, `health` or `other` under the service's prefix (bounded). */
export function toolRouteOf(service: string): (req: IncomingMessage) => string {
  const mcp = `/${service}/mcp`;
  return (req) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (path === mcp) return 'mcp';
    if (path === '/health' || path === `/${service}/health` || path.startsWith('/health/')) return 'health';
    return 'other';
  };
}
