// `platform migrate`: idempotent, safe to run concurrently, and blind to the web application's tables.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { startPlatform } from '../helpers/processes.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ migrated: false, authjs: false });
});
afterAll(async () => {
  await db?.drop();
});

const run = async (env: Record<string, string | undefined>) => {
  const p = startPlatform(['migrate'], env);
  const code = await p.exited;
  return { code, out: p.output() };
};

describe('platform migrate', () => {
  it('applies every migration once, even when three run at the same time, without the Auth.js tables present', async () => {
    const runs = await Promise.all([1, 2, 3].map(() => run({ DATABASE_URL: db.url })));
    for (const r of runs) expect(r.code, r.out).toBe(0);
    const applied = runs.flatMap((r) => r.out.split('\n').filter((l) => l.startsWith('applied ')));
    const { rows } = await db.pool.query('SELECT component, version FROM platform.schema_migrations');
    expect(applied).toHaveLength(rows.length);
    expect(rows.length).toBeGreaterThan(0);
    const again = await run({ DATABASE_URL: db.url.replace('postgresql://', 'postgresql+asyncpg://') });
    expect(again.code).toBe(0);
    expect(again.out).toMatch(/0 applied/);
    const tables = await db.pool.query(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name IN ('users','accounts','sessions','verification_token')`,
    );
    expect(tables.rows).toEqual([]);
  });

  it('leaves existing Auth.js tables untouched', async () => {
    const other = await createTestDatabase({ migrated: false });
    try {
      await other.pool.query(`INSERT INTO users (name, email) VALUES ('a', 'a@b.c')`);
      const q = `SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2`;
      const before = await other.pool.query(q);
      expect((await run({ DATABASE_URL: other.url })).code).toBe(0);
      expect((await other.pool.query(q)).rows).toEqual(before.rows);
      expect((await other.pool.query('SELECT count(*)::int AS n FROM users')).rows[0].n).toBe(1);
    } finally {
      await other.drop();
    }
  });

  it('refuses a non-PostgreSQL DATABASE_URL with one line', async () => {
    const r = await run({ DATABASE_URL: 'sqlite:///tmp/app.db' });
    expect(r.code).not.toBe(0);
    expect(r.out.trim().split('\n')).toHaveLength(1);
    expect(r.out).toMatch(/DATABASE_URL/);
  });
});
