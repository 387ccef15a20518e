import type { Pool } from '../../../lib/db.ts';

/**
 * The two monitors counted from the tables rather than per call, so every replica reports the same numbers:
 * idempotency keys under which more than one proposal was written in the last 24 h (each is a duplicate
 * ledger row, which the idempotency rule forbids), and the metric conflicts recorded in the last 24 h.
 */
export async function auditCounts(
  pool: Pool,
): Promise<{ idempotencyViolations: number; unresolvedConflicts: number }> {
  const { rows } = await pool.query<{ violations: number; conflicts: number }>(
    `SELECT
       (SELECT count(*)::int FROM (
          SELECT 1 FROM platform.artifact_event
           WHERE op = 'propose' AND at > now() - interval '24 hours' AND detail ? 'idempotency_key'
           GROUP BY actor_email, detail->>'idempotency_key'
          HAVING count(*) > 1) dup) AS violations,
       (SELECT count(*)::int FROM platform.metric_conflicts
         WHERE created_at > now() - interval '24 hours') AS conflicts`,
  );
  return { idempotencyViolations: rows[0]!.violations, unresolvedConflicts: rows[0]!.conflicts };
}
