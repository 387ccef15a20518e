import type { Pool } from '../../lib/db.ts';
import { type DpopReplayStore, dpopJtiKey } from '../../lib/dpop/index.ts';

/**
 * DPoP proofs seen at the admin API, recorded in Postgres rather than Redis: an administrator must be able to
 * revoke while Redis is away (the revocation itself is kept in Postgres and published when Redis returns), and
 * the admin API's proofs are few. Every replica shares the table, so a proof is still accepted once across all
 * of them. The rows sit in the client assertions' table (keyed `dpop:admin`, the hex key of the proof's jkt and
 * jti) and the hourly purge removes them once expired; the iat window refuses an old proof long before that.
 * The cost: one INSERT per admin request, beside the several the admin action itself makes.
 */
export class DatabaseDpopReplayStore implements DpopReplayStore {
  readonly #pool: Pool;
  constructor(pool: Pool) {
    this.#pool = pool;
  }
  async firstUse(jti: string, jkt: string, ttlSeconds: number): Promise<boolean> {
    const r = await this.#pool.query({
      name: 'dpop_admin_proof',
      text: `INSERT INTO platform.client_assertion_jtis (client_id, jti, expires_at)
             VALUES ('dpop:admin', $1, now() + make_interval(secs => $2)) ON CONFLICT DO NOTHING`,
      values: [dpopJtiKey(jti, jkt), Math.max(1, Math.ceil(ttlSeconds))],
    });
    return r.rowCount === 1;
  }
}
