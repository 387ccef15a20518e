// Which database failures mean "unavailable, answer 503 and retry shortly" (lib/db.ts), and what the pool does
// with them: a failed connection attempt is retried until the endpoint answers again, a connection lost while
// checked out neither crashes the process nor goes back to the pool. The real 25006 of a real standby, and the
// pool moving to a new primary, are in test/ha/postgres-standby.test.ts.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, isDatabaseUnavailable, isPlainRead } from '../../lib/db.ts';
import { createLogger } from '../../lib/logger.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { startTcpRelay } from '../helpers/tcp-relay.ts';

const log = createLogger({ name: 'db-errors-test', level: 'silent' });

function dbError(code: string, message = 'x'): pg.DatabaseError {
  const e = new pg.DatabaseError(message, message.length, 'error');
  e.code = code;
  return e;
}

function netError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:1`), { code });
}

describe('isDatabaseUnavailable', () => {
  const unavailable: Array<[string, Error]> = [
    ['25006 read-only transaction (a standby answered)', dbError('25006')],
    ['57P01 admin shutdown', dbError('57P01')],
    ['57P02 crash shutdown', dbError('57P02')],
    ['57P03 cannot connect now', dbError('57P03')],
    ['08006 connection failure', dbError('08006')],
    ['08001 unable to establish', dbError('08001')],
    ['08003 connection does not exist', dbError('08003')],
    ['53300 too many connections', dbError('53300')],
    ['ECONNRESET', netError('ECONNRESET')],
    ['ECONNREFUSED', netError('ECONNREFUSED')],
    ['EPIPE', netError('EPIPE')],
    ['ETIMEDOUT', netError('ETIMEDOUT')],
    ['Connection terminated unexpectedly', new Error('Connection terminated unexpectedly')],
    [
      'Connection terminated due to connection timeout',
      new Error('Connection terminated due to connection timeout'),
    ],
    ['timeout exceeded when trying to connect', new Error('timeout exceeded when trying to connect')],
    ['a closed client', new Error('Client was closed and is not queryable')],
    ['a wrapped reset', new Error('refresh failed', { cause: netError('ECONNRESET') })],
    ['every address refused', new AggregateError([netError('ECONNREFUSED'), netError('ECONNREFUSED')])],
  ];
  for (const [name, err] of unavailable) {
    it(`${name} → unavailable`, () => expect(isDatabaseUnavailable(err)).toBe(true));
  }

  const bugs: Array<[string, unknown]> = [
    ['23505 unique violation', dbError('23505')],
    ['42601 syntax error', dbError('42601')],
    ['42P01 undefined table', dbError('42P01')],
    ['40001 serialization failure', dbError('40001')],
    ['a plain Error', new Error('boom')],
    ['not an Error', { code: 'ECONNRESET' }],
  ];
  for (const [name, err] of bugs) {
    it(`${name} → not unavailable (a 500 or the caller's own handling)`, () =>
      expect(isDatabaseUnavailable(err)).toBe(false));
  }
});

describe('isPlainRead: the statements retried after a lost connection', () => {
  it('plain selects are reads', () => {
    expect(isPlainRead('SELECT 1')).toBe(true);
    expect(isPlainRead('  select * from platform.clients where id = $1')).toBe(true);
    expect(isPlainRead('WITH c AS (SELECT 1) SELECT * FROM c')).toBe(true);
  });
  it('writes, locks and state-changing functions are not', () => {
    expect(isPlainRead('INSERT INTO t VALUES (1)')).toBe(false);
    expect(isPlainRead('WITH c AS (SELECT 1) UPDATE t SET a = 1')).toBe(false);
    expect(isPlainRead('WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d')).toBe(false);
    expect(isPlainRead('SELECT * FROM t WHERE id = 1 FOR UPDATE')).toBe(false);
    expect(isPlainRead('SELECT * FROM t FOR KEY SHARE')).toBe(false);
    expect(isPlainRead("SELECT nextval('s')")).toBe(false);
    expect(isPlainRead('SELECT pg_advisory_lock(1)')).toBe(false);
    expect(isPlainRead('SELECT 1; DELETE FROM t')).toBe(false);
  });
});

describe('the pool through an endpoint that goes away', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ migrated: false, authjs: false });
    await db.pool.query('CREATE TABLE marks (n int)');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('retries a connection attempt while nothing answers, and succeeds once the endpoint is back', async () => {
    const ep = await startTcpRelay(Number(new URL(db.url).port || 5432), { listening: false });
    const url = ep.urlFor(db.url);
    const pool = createPool(url, log, { connectRetryMillis: 5000 });
    try {
      // Nothing listens yet: the first attempts are refused; the endpoint comes up 600 ms later.
      const write = pool.query('INSERT INTO marks VALUES (1) RETURNING n');
      setTimeout(() => void ep.up(), 600);
      expect((await write).rows).toEqual([{ n: 1 }]);
      // Without the retry the same write fails at once, as unavailable.
      await ep.down();
      const noRetry = createPool(url, log, { connectRetryMillis: 0 });
      const err = await noRetry.query('SELECT 1').catch((e: unknown) => e);
      await noRetry.end();
      expect(isDatabaseUnavailable(err)).toBe(true);
    } finally {
      await pool.end();
      await ep.down();
    }
  });

  it('a checked-out connection that drops crashes nothing and is not given back to the pool', async () => {
    const pool = createPool(db.url, log, { max: 1 });
    try {
      const client = await pool.connect();
      const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      // The server's goodbye arrives as an error event on a checked-out client: no listener of the caller's.
      await new Promise((r) => setTimeout(r, 200));
      const err = await client.query('SELECT 1').catch((e: unknown) => e);
      expect(isDatabaseUnavailable(err)).toBe(true);
      client.release();
      // The only slot gets a fresh connection.
      const again = (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      expect(again).not.toBe(pid);
    } finally {
      await pool.end();
    }
  });

  it('a read whose connection is lost mid-way is retried once; a write is not (it may have committed)', async () => {
    const pool = createPool(db.url, log, { max: 2 });
    /** Terminates the backend running `marker` (the pool's statement) as soon as it shows up. */
    const terminate = async (marker: string) => {
      for (let i = 0; i < 100; i++) {
        const r = await db.pool.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE query LIKE $1 AND pid <> pg_backend_pid() AND state = 'active'`,
          [`%${marker}%`],
        );
        if (r.rowCount) return;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`no backend ran ${marker}`);
    };
    try {
      const read = pool.query<{ n: number }>('SELECT 7 AS n, pg_sleep(0.5) AS read_marker');
      await terminate('read_marker');
      expect((await read).rows[0]!.n).toBe(7);
      const write = pool
        .query('INSERT INTO marks SELECT 2 FROM pg_sleep(0.5) AS write_marker')
        .catch((e: unknown) => e);
      await terminate('write_marker');
      expect(isDatabaseUnavailable(await write)).toBe(true);
      expect((await db.pool.query('SELECT count(*)::int AS c FROM marks WHERE n = 2')).rows[0]!.c).toBe(0);
    } finally {
      await pool.end();
    }
  });
});
