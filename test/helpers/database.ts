import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { inject } from 'vitest';
import { MIGRATION_SETS } from '../../cli/migrations.ts';
import { migrate } from '../../lib/migrate.ts';

const AUTHJS_SCHEMA = new URL('../../idp/authjs/schema.sql', import.meta.url);

export interface TestDatabase {
  url: string;
  pool: pg.Pool;
  drop(): Promise<void>;
}

/**
 * A fresh database of its own for one test file: created from the server found by the global setup, with the
 * Auth.js tables (the web application's) and, unless `migrated: false`, the project's migrations applied.
 */
export async function createTestDatabase(
  opts: { migrated?: boolean; authjs?: boolean } = {},
): Promise<TestDatabase> {
  const adminUrl = inject('databaseUrl');
  const name = `t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const pool = new pg.Pool({ connectionString: url, max: 5 });
  // DROP DATABASE … WITH (FORCE) may terminate a connection the pool is still closing; that is expected.
  pool.on('error', () => {});
  if (opts.authjs !== false) await pool.query(await readFile(AUTHJS_SCHEMA, 'utf8'));
  if (opts.migrated !== false) await migrate(pool, MIGRATION_SETS);
  return {
    url,
    pool,
    async drop() {
      await pool.end();
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      try {
        await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await a.end();
      }
    },
  };
}

/**
 * Resolves once at least `n` sessions of the pool's database wait for a lock (a row or transaction lock held by
 * another): how a test knows the statements it started are queued before it lets the holder go.
 */
export async function lockWaiters(pool: pg.Pool, n: number): Promise<void> {
  for (;;) {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (rows[0]!.n >= n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

export interface SeededUser {
  id: number;
  email: string;
  sub: string;
  sessionToken: string;
}

/** A signed-in web-application user: a `users` row, an Entra account row and an unexpired session. */
export async function seedUser(
  pool: pg.Pool,
  opts: { email?: string; entraOid?: string | null; sessionTtlSeconds?: number } = {},
): Promise<SeededUser> {
  const email = opts.email ?? `user-${randomBytes(4).toString('hex')}@Example.com`;
  const { rows } = await pool.query<{ id: number }>(
    'INSERT INTO users (name, email) VALUES ($1, $2) RETURNING id',
    ['Test User', email],
  );
  const id = rows[0]!.id;
  let sub = String(id);
  if (opts.entraOid !== null) {
    sub = opts.entraOid ?? crypto.randomUUID();
    await pool.query(
      `INSERT INTO accounts ("userId", type, provider, "providerAccountId") VALUES ($1, 'oidc', 'microsoft-entra-id', $2)`,
      [id, sub],
    );
  }
  const sessionToken = randomBytes(24).toString('hex');
  await pool.query(
    `INSERT INTO sessions ("userId", expires, "sessionToken") VALUES ($1, now() + make_interval(secs => $2), $3)`,
    [id, opts.sessionTtlSeconds ?? 3600, sessionToken],
  );
  return { id, email: email.toLowerCase(), sub, sessionToken };
}

/** Another web session for a seeded user, as the web application makes when the user signs in again. */
export async function addSession(pool: pg.Pool, userId: number, ttlSeconds = 3600): Promise<string> {
  const sessionToken = randomBytes(24).toString('hex');
  await pool.query(
    `INSERT INTO sessions ("userId", expires, "sessionToken") VALUES ($1, now() + make_interval(secs => $2), $3)`,
    [userId, ttlSeconds, sessionToken],
  );
  return sessionToken;
}
