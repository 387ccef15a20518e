import { ident, isDatabaseUnavailable, type Pool } from '../../lib/db.ts';
import type { Identity } from '../../lib/identity.ts';
import type { Logger } from '../../lib/logger.ts';
import { UserNotProvisionedError } from './errors.ts';

/**
 * `verified`: the caller has a row in the web application's users table.
 * `unverified`: the database could not be asked. The request is not refused with a 5xx (operational check #20, docs/operations.md: a
 * dependency down degrades); instead every tool call answers a `database_unavailable` tool error, so an
 * unprovisioned caller still gets nothing done while the MCP session itself stays usable.
 */
export type Provisioning = 'verified' | 'unverified';

export type ProvisioningCheck = (identity: Identity, log: Logger) => Promise<Provisioning>;

export function createProvisioningCheck(pool: Pool, usersTable: string): ProvisioningCheck {
  // Auth.js stores the email as the provider gave it; the IdP lowercases it, so compare lowercased.
  const sql = `SELECT 1 FROM ${ident(usersTable)} WHERE lower(email) = $1 LIMIT 1`;
  return async (identity, log) => {
    let found: boolean;
    try {
      found = ((await pool.query(sql, [identity.email.toLowerCase()])).rowCount ?? 0) > 0;
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      log.warn(
        { err: { message: (err as Error).message } },
        'database unavailable: provisioning unverified, tools degraded',
      );
      return 'unverified';
    }
    if (!found) throw new UserNotProvisionedError(identity.email);
    return 'verified';
  };
}
