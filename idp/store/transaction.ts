import type { Pool, PoolClient } from '../../lib/db.ts';

/** What a store statement runs on: the pool (a statement of its own) or a client inside a transaction. */
export type Queryable = Pick<Pool, 'query'>;

/** Runs `fn` in a READ COMMITTED transaction on one connection: committed when it returns, rolled back on throw. */
export async function inTransaction<T>(pool: Pool, fn: (tx: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

// A user's issuance lock (docs/idp.md § Revocation), a transaction-scoped advisory lock keyed by the lowercased
// email: every issuance from a code (code creation, device approval, code and device-code exchange) holds it
// shared until it commits; revoke-user and block take it exclusively first. So a revocation waits for every
// issuance of the user already under way, and every later one sees the revocation.
const USER_LOCK_CLASS = 1_347_636_043;
/** SQL taking the user lock shared, for the email expression given. */
export const userLockShared = (email: string) =>
  `pg_advisory_xact_lock_shared(${USER_LOCK_CLASS}, hashtext(lower(${email})))`;
/** SQL taking the user lock exclusively, for the email expression given. */
export const userLockExclusive = (email: string) =>
  `pg_advisory_xact_lock(${USER_LOCK_CLASS}, hashtext(lower(${email})))`;

/** SQL: true when the email expression names a blocked user. */
export const isBlockedSql = (email: string) =>
  `EXISTS (SELECT 1 FROM platform.user_blocks b WHERE b.email = lower(${email}))`;

/**
 * SQL: the access token's `iat`, from the database clock at the start of the transaction, so no later than
 * any check the transaction makes (docs/idp.md § Revocation).
 */
export const IAT_SQL = 'floor(extract(epoch FROM now()))::bigint';
