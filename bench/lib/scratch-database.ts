// A benchmark's own database: created on the server the benchmark is given, with the web application's Auth.js
// tables and the project's migrations, dropped at the end. What goes in it is the benchmark's business.
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { MIGRATION_SETS } from '../../cli/migrations.ts';
import { migrate } from '../../lib/migrate.ts';

const AUTHJS_SCHEMA = new URL('../../idp/authjs/schema.sql', import.meta.url);

export interface ScratchDatabase {
  url: string;
  pool: pg.Pool;
  /** Ends the pool and drops the database. */
  drop(): Promise<void>;
}

export async function createScratchDatabase(
  adminUrl: string,
  prefix: string,
  opts: { poolSize?: number } = {},
): Promise<ScratchDatabase> {
  const name = `${prefix}_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: u.toString(), max: opts.poolSize ?? 2 });
  // The final DROP … WITH (FORCE) may end a connection the pool is still closing.
  pool.on('error', () => {});
  await pool.query(await readFile(AUTHJS_SCHEMA, 'utf8'));
  await migrate(pool, MIGRATION_SETS);
  let dropped = false;
  return {
    url: u.toString(),
    pool,
    async drop() {
      if (dropped) return;
      dropped = true;
      await pool.end().catch(() => {});
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}
