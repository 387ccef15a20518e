import { NO_MONITORS } from '../kit/monitors.ts';
import type { ToolService } from '../kit/service.ts';
import { createDealEntities } from './entities.ts';
import { auditCounts } from './store/audit.ts';
import { purgeExpiredKeys } from './store/closures.ts';
import { citationStatusTool } from './tools/citation-status.ts';
import { getConflictsTool } from './tools/get-conflicts.ts';
import { proposeDealClosureTool } from './tools/propose-deal-closure.ts';

// Expired keys are already ignored on lookup; the sweep only keeps the table small.
const PURGE_INTERVAL_MS = 10 * 60_000;
// The audit monitors (idempotency violations, unresolved conflicts) are re-counted this often.
const AUDIT_INTERVAL_MS = 15_000;

export const dealsService: ToolService = {
  name: 'deals',
  version: '1.0.0',
  instructions:
    'Deal closures: propose_deal_closure records a proposal idempotently; get_conflicts and citation_status show what disagrees and what is fragile.',
  tables: [
    'platform.deal_artifacts',
    'platform.idempotency_keys',
    'platform.artifact_event',
    'platform.metric_conflicts',
  ],
  async start({ config, pool, log, monitors }) {
    // Before anything runs: a broken DEALS_ENTITY_SQL stops the start-up with its name.
    const entities = await createDealEntities(pool, {
      enforcement: config.entityEnforcement,
      sql: config.dealsEntitySql,
    });
    const timer = setInterval(() => {
      purgeExpiredKeys(pool).then(
        (n) => n > 0 && log.info({ purged: n }, 'expired idempotency keys purged'),
        (err: Error) => log.warn({ err: { message: err.message } }, 'idempotency key purge failed'),
      );
    }, PURGE_INTERVAL_MS);
    timer.unref();
    const audit = () =>
      auditCounts(pool).then(
        (counts) => monitors.auditCounts(counts),
        (err: Error) => log.warn({ err: { message: err.message } }, 'monitor audit failed'),
      );
    // Counted only where something records them (a process with METRICS_PORT).
    const auditTimer = monitors === NO_MONITORS ? undefined : setInterval(audit, AUDIT_INTERVAL_MS);
    auditTimer?.unref();
    if (auditTimer) void audit();
    return {
      tools: [
        proposeDealClosureTool(pool, entities, monitors),
        getConflictsTool(pool, entities),
        citationStatusTool(pool, entities, monitors),
      ],
      async close() {
        clearInterval(timer);
        clearInterval(auditTimer);
      },
    };
  },
};
