import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type pg from 'pg';

export interface MigrationSet {
  /** Namespace of the versions, e.g. `idp` or `tools`. */
  component: string;
  dir: string;
}

export interface MigrationResult {
  applied: string[];
  skipped: string[];
}

// Any fixed 64-bit number works; it only has to be the same for every migrating process.
const LOCK_KEY = 7_264_812_331n;

/**
 * Applies `NNN_name.sql` files in order, once each. A session-level advisory lock serialises concurrent
 * runs (two replicas starting at once), each file runs in its own transaction together with the row that
 * records it, so a failed file leaves nothing half-applied.
 */
export async function migrate(pool: pg.Pool, sets: readonly MigrationSet[]): Promise<MigrationResult> {
  const client = await pool.connect();
  const result: MigrationResult = { applied: [], skipped: [] };
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY.toString()]);
    await client.query('CREATE SCHEMA IF NOT EXISTS platform');
    await client.query(`CREATE TABLE IF NOT EXISTS platform.schema_migrations (
      component text NOT NULL,
      version text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (component, version))`);
    for (const set of sets) {
      const files = (await readdir(set.dir)).filter((f) => /^\d+_[\w-]+\.sql$/.test(f)).sort();
      const done = new Set(
        (
          await client.query<{ version: string }>(
            'SELECT version FROM platform.schema_migrations WHERE component = $1',
            [set.component],
          )
        ).rows.map((r) => r.version),
      );
      for (const file of files) {
        const version = file.replace(/\.sql$/, '');
        const id = `${set.component}/${version}`;
        if (done.has(version)) {
          result.skipped.push(id);
          continue;
        }
        const sql = await readFile(join(set.dir, file), 'utf8');
        await client.query('BEGIN');
        try {
          await client.query(sql);
          await client.query('INSERT INTO platform.schema_migrations (component, version) VALUES ($1, $2)', [
            set.component,
            version,
          ]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw new Error(`migration ${id} failed: ${(err as Error).message}`, { cause: err });
        }
        result.applied.push(id);
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY.toString()]).catch(() => {});
    client.release();
  }
  return result;
}
