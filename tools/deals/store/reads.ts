import type { Pool } from '../../../lib/db.ts';
import type { ConflictView } from '../conflicts.ts';

export interface StoredConflict extends ConflictView {
  artifact_id: string;
  recorded_at: string;
}

export async function listConflicts(pool: Pool, dealId: string): Promise<StoredConflict[]> {
  const { rows } = await pool.query<{
    artifact_id: string;
    metric: string;
    min_value: number;
    max_value: number;
    relative_gap: number;
    observations: ConflictView['values'];
    created_at: Date;
  }>(
    `SELECT artifact_id, metric, min_value, max_value, relative_gap, observations, created_at
       FROM platform.metric_conflicts WHERE deal_id = $1 ORDER BY created_at, id`,
    [dealId],
  );
  return rows.map((r) => ({
    metric: r.metric,
    artifact_id: r.artifact_id,
    min: r.min_value,
    max: r.max_value,
    relative_gap: r.relative_gap,
    values: r.observations,
    recorded_at: r.created_at.toISOString(),
  }));
}

export interface StoredArtifact {
  artifactId: string;
  schemaVersion: number;
  /** As stored, in the shape of its schema version; decode with artifact-codec. */
  body: unknown;
}

export async function listArtifacts(pool: Pool, dealId: string): Promise<StoredArtifact[]> {
  const { rows } = await pool.query<{ artifact_id: string; schema_version: number; body: unknown }>(
    'SELECT artifact_id, schema_version, body FROM platform.deal_artifacts WHERE deal_id = $1 ORDER BY created_at, artifact_id',
    [dealId],
  );
  return rows.map((r) => ({ artifactId: r.artifact_id, schemaVersion: r.schema_version, body: r.body }));
}
