import type { Pool } from '../../lib/db.ts';
import type { Logger } from '../../lib/logger.ts';

/**
 * How long authorization and device codes are kept past their expiry. Within it a replayed code is still
 * recognised as a replay (and revokes what it issued, RFC 6749 §4.1.2); after it the row only takes space.
 */
export const CODE_RETENTION = '1 day';
/** How often each IdP purges; several replicas purging the same rows is harmless (DELETE is idempotent). */
export const PURGE_INTERVAL_MS = 60 * 60 * 1000;

export interface Purged {
  codes: number;
  deviceCodes: number;
  /** Sign-in records of web sessions that ended more than CODE_RETENTION ago (docs/idp.md § Login freshness). */
  sessionLogins: number;
}

/** Deletes the authorization and device codes that expired more than CODE_RETENTION ago, and old sign-in records. */
export async function purgeExpiredCodes(pool: Pool): Promise<Purged> {
  const codes = await pool.query(
    `DELETE FROM platform.oauth_codes WHERE expires_at < now() - interval '${CODE_RETENTION}'`,
  );
  const device = await pool.query(
    `DELETE FROM platform.device_codes WHERE expires_at < now() - interval '${CODE_RETENTION}'`,
  );
  const logins = await pool.query(
    `DELETE FROM platform.web_session_logins WHERE expires_at < now() - interval '${CODE_RETENTION}'`,
  );
  // A granted resource whose code was never exchanged (no family) and is purged itself.
  await pool.query(
    `DELETE FROM platform.granted_resources g
      WHERE g.created_at < now() - interval '${CODE_RETENTION}'
        AND NOT EXISTS (SELECT 1 FROM platform.refresh_families f WHERE f.id = g.family_id)
        AND NOT EXISTS (SELECT 1 FROM platform.oauth_codes c WHERE c.family_id = g.family_id)
        AND NOT EXISTS (SELECT 1 FROM platform.device_codes d WHERE d.family_id = g.family_id)`,
  );
  // A used client-assertion jti is only needed until its assertion expires (it cannot be replayed after).
  await pool.query('DELETE FROM platform.client_assertion_jtis WHERE expires_at < now()');
  // A connect flow's state is never taken after it expires (docs/connections.md): the row only takes space.
  await pool.query('DELETE FROM platform.connection_states WHERE expires_at < now()');
  return {
    codes: codes.rowCount ?? 0,
    deviceCodes: device.rowCount ?? 0,
    sessionLogins: logins.rowCount ?? 0,
  };
}

/**
 * Purges now-and-then for as long as the IdP runs: a first time a little after start (spread over
 * `intervalMs / 60`, so replicas started together do not all purge at once), then every `intervalMs`. A failure
 * (the database away) is logged and tried again at the next turn. The timers never keep the process alive.
 */
export function schedulePurge(opts: { pool: Pool; log: Logger; intervalMs?: number }): () => void {
  const interval = opts.intervalMs ?? PURGE_INTERVAL_MS;
  let timer: NodeJS.Timeout;
  const run = async () => {
    try {
      const n = await purgeExpiredCodes(opts.pool);
      if (n.codes + n.deviceCodes + n.sessionLogins > 0) opts.log.info({ ...n }, 'expired codes purged');
    } catch (err) {
      opts.log.warn({ err: { message: (err as Error).message } }, 'expired codes not purged this time');
    }
    timer = setTimeout(run, interval).unref();
  };
  timer = setTimeout(run, Math.random() * (interval / 60)).unref();
  return () => clearTimeout(timer);
}
