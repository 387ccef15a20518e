import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from '../../../lib/db.ts';
import { encodeClosure } from '../artifact-codec.ts';
import type { ConflictView } from '../conflicts.ts';
import { IDEMPOTENCY_RETENTION_HOURS, IdempotencyConflictError, requestHash } from '../idempotency.ts';
import type { ClosureBody } from '../model.ts';

const OPERATION = 'propose_deal_closure';

export interface Proposal {
  dealId: string;
  skill: string;
  body: ClosureBody;
  conflicts: readonly ConflictView[];
  idempotencyKey: string;
}

export interface Actor {
  email: string;
  sub: string;
  requestId: string;
}

export interface ProposalResult {
  artifactId: string;
  wasInserted: boolean;
  schemaVersion: number;
}

/**
 * Writes a proposal once per (caller, idempotency key). The key row is inserted first: a concurrent identical
 * call blocks on its unique index until this transaction ends, then finds the key and returns the same
 * artifact with `wasInserted: false` — one ledger row however many calls race (spec check 17). An expired key
 * (older than 24 h) is taken over as if new.
 */
export async function proposeClosure(pool: Pool, p: Proposal, actor: Actor): Promise<ProposalResult> {
  const { schemaVersion, body } = encodeClosure(p.body);
  const hash = requestHash({ deal_id: p.dealId, skill: p.skill, body });
  const owner = actor.email.toLowerCase();
  const client = await pool.connect();
  // A checked-out client whose connection drops between queries emits 'error' with nobody listening (the
  // pool listens only to idle ones), which would crash the process; the next query rejects anyway.
  const ignore = () => {};
  client.on('error', ignore);
  let outcome: ProposalResult | { priorHash: string; prior: ProposalResult };
  try {
    await client.query('BEGIN');
    outcome = await claimAndWrite(client, p, { owner, hash, schemaVersion, body, actor });
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    client.off('error', ignore);
    // A connection that failed mid-transaction is not given back to the pool.
    client.release(err as Error);
    throw err;
  }
  client.off('error', ignore);
  client.release();
  if ('priorHash' in outcome) {
    if (outcome.priorHash !== hash) throw new IdempotencyConflictError(p.idempotencyKey);
    return outcome.prior;
  }
  return outcome;
}

interface WriteParams {
  owner: string;
  hash: string;
  schemaVersion: number;
  body: ClosureBody;
  actor: Actor;
}

async function claimAndWrite(
  client: PoolClient,
  p: Proposal,
  w: WriteParams,
): Promise<ProposalResult | { priorHash: string; prior: ProposalResult }> {
  const artifactId = randomUUID();
  const claimed = await client.query(
    `INSERT INTO platform.idempotency_keys (owner, operation, key, request_hash, artifact_id, expires_at)
     VALUES ($1, $2, $3, $4, $5, now() + make_interval(hours => $6))
     ON CONFLICT (owner, operation, key) DO UPDATE
       SET request_hash = EXCLUDED.request_hash, artifact_id = EXCLUDED.artifact_id,
           created_at = now(), expires_at = EXCLUDED.expires_at
       WHERE platform.idempotency_keys.expires_at <= now()
     RETURNING artifact_id`,
    [w.owner, OPERATION, p.idempotencyKey, w.hash, artifactId, IDEMPOTENCY_RETENTION_HOURS],
  );
  if (claimed.rowCount === 0) {
    const { rows } = await client.query<{
      request_hash: string;
      artifact_id: string;
      schema_version: number;
    }>(
      `SELECT k.request_hash, k.artifact_id, a.schema_version
         FROM platform.idempotency_keys k JOIN platform.deal_artifacts a USING (artifact_id)
        WHERE k.owner = $1 AND k.operation = $2 AND k.key = $3`,
      [w.owner, OPERATION, p.idempotencyKey],
    );
    const prior = rows[0]!;
    return {
      priorHash: prior.request_hash,
      prior: { artifactId: prior.artifact_id, wasInserted: false, schemaVersion: prior.schema_version },
    };
  }
  await client.query(
    `INSERT INTO platform.deal_artifacts (artifact_id, deal_id, schema_version, skill, body, created_by)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [artifactId, p.dealId, w.schemaVersion, p.skill, JSON.stringify(w.body), w.owner],
  );
  for (const c of p.conflicts) {
    await client.query(
      `INSERT INTO platform.metric_conflicts (artifact_id, deal_id, metric, min_value, max_value, relative_gap, observations)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [artifactId, p.dealId, c.metric, c.min, c.max, c.relative_gap, JSON.stringify(c.values)],
    );
  }
  // The audit row names the conflicts, so a conflict is on record even where nobody opens the conflict view.
  await client.query(
    `INSERT INTO platform.artifact_event (artifact_id, deal_id, op, actor_email, actor_sub, request_id, detail)
     VALUES ($1, $2, 'propose', $3, $4, $5, $6)`,
    [
      artifactId,
      p.dealId,
      w.owner,
      w.actor.sub,
      w.actor.requestId,
      JSON.stringify({
        idempotency_key: p.idempotencyKey,
        schema_version: w.schemaVersion,
        skill: p.skill,
        metrics: w.body.metrics.length,
        citations: w.body.citations.length,
        conflicts: p.conflicts.map((c) => ({
          metric: c.metric,
          min: c.min,
          max: c.max,
          relative_gap: c.relative_gap,
        })),
      }),
    ],
  );
  return { artifactId, wasInserted: true, schemaVersion: w.schemaVersion };
}

/** Idempotency records past their 24 h; run periodically by the deals server. */
export async function purgeExpiredKeys(pool: Pool): Promise<number> {
  const r = await pool.query('DELETE FROM platform.idempotency_keys WHERE expires_at <= now()');
  return r.rowCount ?? 0;
}
