import type { Pool } from '../../lib/db.ts';

/** When each key id was first published here (table platform.signing_keys, migration 003). */
export interface KeyPublicationStore {
  /** Notes the configured keys at start-up; a key seen before keeps its first date. */
  record(kids: readonly string[], alg: string): Promise<void>;
  publishedSince(): Promise<Map<string, Date>>;
}

export function createKeyPublicationStore(pool: Pool): KeyPublicationStore {
  return {
    async record(kids, alg) {
      await pool.query(
        `INSERT INTO platform.signing_keys (kid, alg) SELECT unnest($1::text[]), $2
         ON CONFLICT (kid) DO NOTHING`,
        [kids, alg],
      );
    },
    async publishedSince() {
      const { rows } = await pool.query<{ kid: string; first_published_at: Date }>(
        'SELECT kid, first_published_at FROM platform.signing_keys',
      );
      return new Map(rows.map((r) => [r.kid, r.first_published_at]));
    },
  };
}
