// Without PLATFORM_ROLES_SQL a refresh reads the user's entity grants inside its rotating statement
// (RefreshStoreOptions.entityGrantsByEmail): the same rows the separate read (idp/entity-grants claims()) finds,
// one round trip fewer. Held here to that read, row for row; an email that does not lowercase to itself, a
// caller's transaction or the option off leave the read to the caller.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEntityGrants, entClaims } from '../../idp/entity-grants/entity-grants.ts';
import { createRefreshTokenStore, type RefreshTokenStore } from '../../idp/store/refresh-tokens.ts';
import { inTransaction } from '../../idp/store/transaction.ts';
import { createTestDatabase, lockWaiters, type TestDatabase } from '../helpers/database.ts';
import { issueFamily, rotateToken } from '../helpers/refresh-store.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const NO_ROLES = { roles: async () => [] };

const family = (store: RefreshTokenStore, email: string) => issueFamily(db.pool, store, email);

async function rotate(store: RefreshTokenStore, hash: string) {
  const { out, next } = await rotateToken(store, hash);
  if (out.kind !== 'rotated') throw new Error(`not rotated: ${out.kind}`);
  return { out, hash: next };
}

describe('the entity grants read in the rotation', () => {
  it('are the rows the separate read finds (several entities and permissions, none, another user’s)', async () => {
    const store = createRefreshTokenStore(db.pool, { retrySeconds: 10, entityGrantsByEmail: true });
    const grants = createEntityGrants({
      pool: db.pool,
      max: 16,
      roles: NO_ROLES,
      revocation: { cutOff: async () => 0 } as never,
    });
    const email = `ann-${randomUUID()}@example.com`;
    await db.pool.query(
      `INSERT INTO platform.entity_grants (entity, permission, email, granted_by) VALUES
         ('deal:1', 'read', $1, 't'), ('deal:1', 'write', $1, 't'), ('deal:2', 'read', $1, 't'),
         ('deal:3', 'read', 'someone-else@example.com', 't')`,
      [email],
    );
    await db.pool.query(
      `INSERT INTO platform.entity_grants (entity, permission, role, granted_by) VALUES ('deal:9', 'read', 'staff', 't')`,
    );
    const { out, hash } = await rotate(store, await family(store, email));
    expect(out.entRows).toBeDefined();
    const separate = await grants.claims(out.grant, db.pool);
    expect(entClaims(out.entRows!, 16)).toEqual(separate);
    expect(separate).toEqual({ ent: { 'deal:1': ['read', 'write'], 'deal:2': ['read'] } });
    // The chain goes on: the successor rotates too.
    expect((await rotate(store, hash)).out.entRows).toHaveLength(3);

    const none = await rotate(store, await family(store, `bob-${randomUUID()}@example.com`));
    expect(none.out.entRows).toEqual([]);
    expect(entClaims(none.out.entRows!, 16)).toEqual(await grants.claims(none.out.grant, db.pool));
  });

  it('are left to the caller: an email that lowercases differently, the option off', async () => {
    const on = createRefreshTokenStore(db.pool, { retrySeconds: 10, entityGrantsByEmail: true });
    const mixed = await rotate(on, await family(on, `Ann-${randomUUID()}@Example.com`));
    expect(mixed.out.entRows).toBeUndefined();
    const off = createRefreshTokenStore(db.pool, { retrySeconds: 10 });
    expect(
      (await rotate(off, await family(off, `cy-${randomUUID()}@example.com`))).out.entRows,
    ).toBeUndefined();
  });
});

describe('an ungrant and an issuance reading the same grant rows', () => {
  // An ungrant of both permissions deletes the user's two rows of the entity; an issuance reads all the user's rows
  // FOR SHARE. Taken in different orders (the DELETE in its index's order, read before write; the readers in the
  // heap's, write first when it was granted first), each could hold one row while waiting for the other: a
  // deadlock, which Postgres breaks after a second by aborting one of them (an ungrant or a token request
  // answered 500). Forced here: two transactions hold a row each; the ungrant, then the issuance, queue behind
  // them; the read row's holder goes first, then, once both wait on the write row's holder alone, that one.
  const grants = () =>
    createEntityGrants({
      pool: db.pool,
      max: 16,
      roles: NO_ROLES,
      revocation: { cutOff: async () => ({ cutoff: 0 }) } as never,
    });

  /** Resolves once `n` sessions wait for a lock and none of them waits for the session `gone`. */
  async function queuedPast(n: number, gone: number) {
    for (;;) {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'
            AND cardinality(pg_blocking_pids(pid)) > 0 AND NOT $1 = ANY(pg_blocking_pids(pid))`,
        [gone],
      );
      if (rows[0]!.n >= n) return;
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  async function race<T>(prepare: (email: string) => Promise<() => Promise<T>>): Promise<T | undefined> {
    const email = `race-${randomUUID()}@example.com`;
    // Write first: it is the lower id and the earlier row in the heap.
    for (const permission of ['write', 'read'])
      await db.pool.query(
        `INSERT INTO platform.entity_grants (entity, permission, email, granted_by) VALUES ('deal:7', $1, $2, 't')`,
        [permission, email],
      );
    const issue = await prepare(email);
    const [holdsRead, holdsWrite] = [await db.pool.connect(), await db.pool.connect()];
    try {
      const hold = async (c: typeof holdsRead, permission: string) => {
        await c.query('BEGIN');
        await c.query(
          'SELECT 1 FROM platform.entity_grants WHERE email = $1 AND permission = $2 FOR UPDATE',
          [email, permission],
        );
        return (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      };
      const readHolder = await hold(holdsRead, 'read');
      await hold(holdsWrite, 'write');
      const ungrant = grants().ungrant('deal:7', undefined, { email }, 'test');
      await lockWaiters(db.pool, 1);
      const issued = issue();
      await lockWaiters(db.pool, 2);
      await holdsRead.query('ROLLBACK');
      await queuedPast(2, readHolder);
      await holdsWrite.query('ROLLBACK');
      const [u, i] = await Promise.allSettled([ungrant, issued]);
      expect(u.status === 'rejected' && String(u.reason)).toBe(false);
      expect(i.status === 'rejected' && String(i.reason)).toBe(false);
      expect(u.status === 'fulfilled' && u.value.removed).toBe(2);
      return i.status === 'fulfilled' ? i.value : undefined;
    } finally {
      holdsRead.release();
      holdsWrite.release();
    }
  }

  it('the refresh (its rotating statement reads them): both complete, the rotation after the ungrant', async () => {
    const store = createRefreshTokenStore(db.pool, { retrySeconds: 10, entityGrantsByEmail: true });
    const rotated = await race(async (email) => {
      const hash = await family(store, email);
      return () => rotate(store, hash);
    });
    expect(rotated?.out.entRows).toEqual([]);
  });

  it('an issuance in a transaction (claims()): both complete, the claims after the ungrant', async () => {
    const claims = await race(
      async (email) => () =>
        inTransaction(db.pool, (tx) => grants().claims({ userId: randomUUID(), email }, tx)),
    );
    expect(claims).toEqual({});
  });
});
