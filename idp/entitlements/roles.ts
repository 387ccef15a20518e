import { ConfigError } from '../../lib/config.ts';
import type { Pool } from '../../lib/db.ts';
import type { Queryable } from '../store/transaction.ts';

/** The user's roles in the web application, read with PLATFORM_ROLES_SQL (`$1` = the user id). */
export interface RoleSource {
  /** On `db` when given (an issuance's transaction, so it needs no second connection), else the pool. */
  roles(userId: string, db?: Queryable): Promise<string[]>;
}

const NO_ROLES: RoleSource = { roles: async () => [] };

/**
 * Checks the query against the database once, before the provider listens: it must parse, name tables that
 * exist and return exactly one column. A broken query would otherwise surface as a server error at sign-in.
 */
export async function createRoleSource(pool: Pool, sql: string | undefined): Promise<RoleSource> {
  if (sql === undefined) return NO_ROLES;
  const client = await pool.connect();
  try {
    // Run once with a NULL user id (matches nobody, fits any id type) in a read-only transaction: the
    // answer's row description says how many columns the query returns.
    await client.query('BEGIN READ ONLY');
    const r = await client.query({ text: sql, values: [null], rowMode: 'array' });
    if (r.fields.length !== 1) {
      throw new ConfigError(
        'PLATFORM_ROLES_SQL',
        `must return one column (role names), returns ${r.fields.length}`,
      );
    }
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError('PLATFORM_ROLES_SQL', `the database refuses it: ${(err as Error).message}`);
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    client.release();
  }
  const text = sql;
  return {
    async roles(userId, db = pool) {
      const { rows } = await db.query<unknown[]>({ text, values: [userId], rowMode: 'array' });
      const out: string[] = [];
      for (const r of rows) {
        const v = r[0];
        if (v === null || v === undefined) continue;
        const role = String(v).trim();
        if (role !== '') out.push(role);
      }
      return out;
    },
  };
}
