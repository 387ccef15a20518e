import type { Pool } from '../../lib/db.ts';
import type { Logger } from '../../lib/logger.ts';

export interface Refusal {
  source: 'token' | 'consent' | 'device';
  /** The OAuth error answered (invalid_grant, invalid_scope, access_denied, …). */
  error: string;
  reason: string;
  email?: string;
  subject?: string;
  clientId?: string;
  grantType?: string;
  requestId?: string;
  /**
   * The grant presented, hashed as stored (authorization code, refresh token or device code): the user it
   * names, if any, is looked up in the same statement, so a refused refresh still says whose it was.
   */
  presented?: { kind: 'code' | 'refresh' | 'device'; hash: string };
}

/** The append-only record of refusals (platform.refusal_audit, migration 020; docs/console.md). */
export interface RefusalStore {
  /**
   * Records a refusal. Never throws: the refusal is answered whatever happens to its record (a failed write is
   * logged), so a database hiccup cannot turn a 400 into a 500.
   */
  record(r: Refusal, log: Logger): Promise<void>;
  /** Issuances and refusals per hour for the last `hours` whole hours (the current one included), oldest first. */
  perHour(hours: number): Promise<Array<{ hour: Date; issued: number; refused: number }>>;
}

// One index range scan per record from the first hour on (issuance_audit_at_id, refusal_audit_at), grouped by
// hour; hours without a row are filled in by perHour.
export const PER_HOUR_QUERY = `
  SELECT date_trunc('hour', issued_at) AS hour, 'i' AS kind, count(*)::int AS n FROM platform.issuance_audit
   WHERE issued_at >= date_trunc('hour', now()) - ($1::int - 1) * interval '1 hour' GROUP BY 1
  UNION ALL
  SELECT date_trunc('hour', at), 'r', count(*)::int FROM platform.refusal_audit
   WHERE at >= date_trunc('hour', now()) - ($1::int - 1) * interval '1 hour' GROUP BY 1`;

export function createRefusalStore(pool: Pool): RefusalStore {
  return {
    async record(r, log) {
      try {
        const p = r.presented;
        await pool.query(
          `WITH holder AS (
             SELECT email, subject FROM platform.refresh_tokens WHERE $9 = 'refresh' AND token_hash = $10
             UNION ALL SELECT email, subject FROM platform.oauth_codes WHERE $9 = 'code' AND code = $10
             UNION ALL SELECT email, subject FROM platform.device_codes WHERE $9 = 'device' AND device_code_hash = $10
             LIMIT 1)
           INSERT INTO platform.refusal_audit (source, error, reason, email, subject, client_id, grant_type, request_id)
           SELECT $1, $2, $3, coalesce($4, (SELECT lower(email) FROM holder)),
                  coalesce($5, (SELECT subject FROM holder)), $6, $7, $8`,
          [
            r.source,
            r.error,
            r.reason.slice(0, 500),
            r.email?.trim().toLowerCase() ?? null,
            r.subject ?? null,
            r.clientId?.slice(0, 2048) ?? null,
            r.grantType?.slice(0, 200) ?? null,
            r.requestId ?? null,
            p?.kind ?? null,
            p?.hash ?? null,
          ],
        );
      } catch (err) {
        log.warn({ err: { message: (err as Error).message } }, 'refusal not recorded');
      }
    },
    async perHour(hours) {
      const [{ rows }, now] = await Promise.all([
        pool.query<{ hour: Date; kind: 'i' | 'r'; n: number }>(PER_HOUR_QUERY, [hours]),
        pool.query<{ hour: Date }>(`SELECT date_trunc('hour', now()) AS hour`),
      ]);
      const last = now.rows[0]!.hour.getTime();
      const out = Array.from({ length: hours }, (_, i) => ({
        hour: new Date(last - (hours - 1 - i) * 3600_000),
        issued: 0,
        refused: 0,
      }));
      for (const r of rows) {
        const slot = out[hours - 1 - Math.round((last - r.hour.getTime()) / 3600_000)];
        if (!slot) continue; // a row stamped in the future (clock skew between replicas)
        if (r.kind === 'i') slot.issued = r.n;
        else slot.refused = r.n;
      }
      return out;
    },
  };
}
