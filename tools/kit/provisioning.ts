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

/** `log`: the request's logger, made when a line needs it (the database being down). */
export type ProvisioningCheck = (identity: Identity, log: () => Logger) => Promise<Provisioning>;

export interface ProvisioningOptions {
  usersTable: string;
  /**
   * How long a found user is remembered (0: ask the database every time). A user deleted from the users table
   * is refused at the latest this long after the deletion; an unknown user is never remembered, so a newly
   * provisioned one gets in at once.
   */
  cacheMs: number;
  /** Most users remembered at once; the oldest entry makes room. */
  cacheSize?: number;
}

/**
 * The users-table lookup behind USER_NOT_PROVISIONED, with a short bounded cache of users found, so a busy
 * caller does not cost one query per request. Requests for the same email while its lookup is in flight share
 * that lookup: under load a caller whose entry has just expired (all of them at once, when their entries were
 * made together) otherwise sent one query per request until the first answer came back (~3.5 % of a call's CPU
 * under `make bench-tools`). A request joins only a query still in flight, never a settled answer (keeping
 * answers is the cache's job, bounded by cacheMs), so the revocation bound is unchanged: a deleted user is
 * refused at the latest cacheMs after the deletion, and with cacheMs 0 by every query made after it. A failed
 * lookup fails every request that shared it, each as before (the database-unavailable path or an error).
 */
export function createProvisioningCheck(pool: Pool, opts: ProvisioningOptions): ProvisioningCheck {
  // Auth.js stores the email as the provider gave it; the IdP lowercases it, so compare lowercased.
  const sql = `SELECT 1 FROM ${ident(opts.usersTable)} WHERE lower(email) = $1 LIMIT 1`;
  const maxEntries = opts.cacheSize ?? 10_000;
  /** email → time it was found; Map keeps insertion order, so the first key is the oldest. */
  const found = new Map<string, number>();
  /** email → the lookup in flight for it (removed once it settles). */
  const asking = new Map<string, Promise<boolean>>();
  const lookup = (email: string): Promise<boolean> => {
    let pending = asking.get(email);
    if (pending === undefined) {
      pending = pool.query(sql, [email]).then(
        (r) => {
          asking.delete(email);
          return (r.rowCount ?? 0) > 0;
        },
        (err: unknown) => {
          asking.delete(email);
          throw err;
        },
      );
      asking.set(email, pending);
    }
    return pending;
  };
  return async (identity, log) => {
    const email = identity.email.toLowerCase();
    const now = performance.now();
    const seen = found.get(email);
    if (seen !== undefined) {
      if (now - seen < opts.cacheMs) return 'verified';
      found.delete(email);
    }
    let exists: boolean;
    try {
      exists = await lookup(email);
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      log().warn(
        { err: { message: (err as Error).message } },
        'database unavailable: provisioning unverified, tools degraded',
      );
      return 'unverified';
    }
    if (!exists) throw new UserNotProvisionedError(identity.email);
    if (opts.cacheMs > 0) {
      if (found.size >= maxEntries) found.delete(found.keys().next().value!);
      found.set(email, now);
    }
    return 'verified';
  };
}
