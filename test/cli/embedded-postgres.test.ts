// The embedded database `platform dev` serves: one PGlite backend shared by many node-postgres connections.
// These are the behaviours a plain multiplexer gets wrong (see cli/dev/embedded-postgres.ts).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DataDirInUseError,
  type EmbeddedPostgres,
  startEmbeddedPostgres,
} from '../../cli/dev/embedded-postgres.ts';
import { createLogger } from '../../lib/logger.ts';

const log = createLogger({ name: 'test', level: 'silent' });
let dir: string;
let epg: EmbeddedPostgres;
let pool: pg.Pool;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'platform-pglite-'));
  epg = await startEmbeddedPostgres({ dataDir: dir, host: '127.0.0.1', port: 0, log });
  pool = new pg.Pool({ connectionString: epg.url, max: 6 });
  await pool.query('CREATE TABLE items (id int PRIMARY KEY, v text)');
}, 60_000);

afterAll(async () => {
  await pool?.end();
  await epg?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('embedded postgres (PGlite over the wire protocol)', () => {
  it('lets every connection prepare the same statement name (the IdP uses named statements)', async () => {
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        pool.query({ name: `stmt_${i % 3}`, text: 'SELECT $1::int AS v' }, [i]),
      ),
    );
    expect(results.map((r) => r.rows[0].v)).toEqual(Array.from({ length: 60 }, (_, i) => i));
  });

  it('never lets one connection see or join another connection’s open transaction', async () => {
    const a = await pool.connect();
    try {
      await a.query('BEGIN');
      await a.query(`INSERT INTO items VALUES (1, 'uncommitted')`);
      // Queued behind the open transaction, so it cannot run inside it.
      const other = pool.query('SELECT count(*)::int AS n FROM items');
      await new Promise((r) => setTimeout(r, 50));
      await a.query('ROLLBACK');
      expect((await other).rows[0].n).toBe(0);
    } finally {
      a.release();
    }
  });

  it('rolls back what a vanished connection left open', async () => {
    const c = new pg.Client({ connectionString: epg.url });
    c.on('error', () => {}); // the abrupt end below is the point
    await c.connect();
    await c.query('BEGIN');
    await c.query(`INSERT INTO items VALUES (2, 'orphan')`);
    (c as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM items WHERE id = 2');
    expect(rows[0].n).toBe(0);
  });

  it('reports SQL errors to the one connection and carries on', async () => {
    await expect(pool.query('SELECT nope')).rejects.toThrow('column "nope" does not exist');
    expect((await pool.query('SELECT 1 AS one')).rows[0].one).toBe(1);
  });

  it('refuses a second process on the same data directory', async () => {
    const other = join(dir, 'other');
    await mkdir(other);
    await writeFile(join(other, '.platform-dev.pid'), String(process.ppid));
    await expect(
      startEmbeddedPostgres({ dataDir: other, host: '127.0.0.1', port: 0, log }),
    ).rejects.toBeInstanceOf(DataDirInUseError);
  });
});
