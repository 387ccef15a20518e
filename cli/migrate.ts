import { databaseUrl, type Env } from '../lib/config.ts';
import { createPool, databaseConnectError } from '../lib/db.ts';
import { createLogger } from '../lib/logger.ts';
import { migrate } from '../lib/migrate.ts';
import { MIGRATION_SETS } from './migrations.ts';

export async function runMigrate(env: Env): Promise<void> {
  const url = databaseUrl(env);
  const log = createLogger({ name: 'migrate', level: 'warn' });
  const pool = createPool(url, log, { max: 1 });
  try {
    const r = await migrate(pool, MIGRATION_SETS).catch((err: unknown) => {
      throw databaseConnectError(err, url, 'DATABASE_URL');
    });
    for (const a of r.applied) process.stdout.write(`applied ${a}\n`);
    process.stdout.write(
      `migrations up to date (${r.applied.length} applied, ${r.skipped.length} already present)\n`,
    );
  } finally {
    await pool.end();
  }
}
