import { ident, type Pool } from '../../lib/db.ts';

export class ProbeError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ProbeError';
  }
}

// node-postgres reports a refused connection to `localhost` (IPv4 and IPv6 tried) as an AggregateError
// with an empty message; the code or the inner errors say what happened.
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err.message) return err.message.split('\n')[0]!;
  if (err instanceof AggregateError && err.errors.length > 0) return describe(err.errors[0]);
  return (err as { code?: string }).code ?? err.name;
}

/**
 * The start-up probe (operational check #16, docs/operations.md): `SELECT 1`, then every table the server reads or writes exists and is
 * readable by the role we connect as. Runs before listening; a failure stops the boot with one line.
 */
export async function probeDatabase(pool: Pool, tables: readonly string[]): Promise<void> {
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    throw new ProbeError(`database probe failed: ${describe(err)}`, { cause: err });
  }
  const { rows } = await pool.query<{ name: string; present: boolean; readable: boolean }>(
    `SELECT t.name, to_regclass(t.q) IS NOT NULL AS present,
            COALESCE(has_table_privilege(to_regclass(t.q), 'SELECT'), false) AS readable
       FROM unnest($1::text[], $2::text[]) AS t(name, q)`,
    [tables, tables.map(ident)],
  );
  const missing = rows.filter((r) => !r.present).map((r) => r.name);
  if (missing.length > 0) {
    throw new ProbeError(
      `database schema not accessible: missing ${missing.join(', ')} ` +
        '(`platform migrate` creates the platform.* tables; the web application owns users)',
    );
  }
  const unreadable = rows.filter((r) => !r.readable).map((r) => r.name);
  if (unreadable.length > 0)
    throw new ProbeError(`database schema not accessible: no SELECT on ${unreadable.join(', ')}`);
}
