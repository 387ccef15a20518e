// The fast rotations of one event-loop turn run as one statement (idp/store/refresh-tokens.ts, lib/coalesce.ts):
// each token in it must come out as it would alone (rotated, refused, or left to the slow path), a batch the
// server refuses must fall back to one statement per token, and the rotating statements must read the token
// they rotate by its hash and nothing else, even on a table never analyzed (fresh installs, every test and
// benchmark database).
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRefreshToken } from '../../idp/endpoints/token-response.ts';
import { createRefreshTokenStore, type RefreshTokenStore } from '../../idp/store/refresh-tokens.ts';
import { rotationStatements } from '../../idp/store/rotation-sql.ts';
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

/**
 * The store over a pool that records the name of every statement it runs; `gate`, when set, holds each statement
 * until it resolves.
 */
function recordingStore(opts: { retrySeconds?: number } = {}): {
  store: RefreshTokenStore;
  names: string[];
  gate: { wait?: Promise<void> };
} {
  const names: string[] = [];
  const gate: { wait?: Promise<void> } = {};
  const pool = {
    query: async (q: string | { name?: string }, ...rest: unknown[]) => {
      names.push(typeof q === 'string' ? q.trim().split(/\s+/)[0]! : (q.name ?? 'unnamed'));
      await gate.wait;
      return (db.pool.query as (...a: unknown[]) => unknown)(q, ...rest);
    },
    connect: () => db.pool.connect(),
  } as unknown as pg.Pool;
  const store = createRefreshTokenStore(pool, {
    retrySeconds: opts.retrySeconds ?? 10,
    entityGrantsByEmail: true,
  });
  return { store, names, gate };
}

const email = (who: string) => `${who}-${randomUUID()}@example.com`;

describe('the rotations of one turn', () => {
  it('share one statement, and each gets its own grant, entity grants, audit row and successor', async () => {
    const { store, names } = recordingStore();
    const members = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const familyId = randomUUID();
        const who = email(`m${i}`);
        if (i % 2 === 0)
          await db.pool.query(
            `INSERT INTO platform.entity_grants (entity, permission, email, granted_by) VALUES ($1, 'read', $2, 't')`,
            [`deal:${i}`, who],
          );
        return { familyId, who, hash: await issueFamily(db.pool, store, who, { familyId }) };
      }),
    );
    names.length = 0;
    // Called in one turn: one statement for the eight.
    const outs = await Promise.all(members.map((m) => rotateToken(store, m.hash)));
    expect(names).toEqual(['refresh_rotate_batch_ent']);
    outs.forEach(({ out }, i) => {
      expect(out.kind).toBe('rotated');
      if (out.kind !== 'rotated') return;
      expect(out.grant.familyId).toBe(members[i]!.familyId);
      expect(out.grant.email).toBe(members[i]!.who);
      expect(out.entRows).toEqual(i % 2 === 0 ? [{ entity: `deal:${i}`, permission: 'read' }] : []);
    });
    const audit = await db.pool.query(
      `SELECT family_id::text, count(*)::int AS n FROM platform.issuance_audit
        WHERE family_id = ANY($1::uuid[]) AND grant_type = 'refresh_token' GROUP BY family_id`,
      [members.map((m) => m.familyId)],
    );
    expect(audit.rows).toHaveLength(8);
    expect(audit.rows.every((r) => r.n === 1)).toBe(true);
    // Every successor is the live token of its family (rotated one at a time: the single statement).
    names.length = 0;
    for (const [i, { next }] of outs.entries()) {
      const again = await rotateToken(store, next);
      expect(again.out.kind === 'rotated' && again.out.grant.familyId).toBe(members[i]!.familyId);
    }
    expect(new Set(names)).toEqual(new Set(['refresh_rotate_ent']));
    // The rotated-out tokens are spent: presented again after the window they are reuse.
  });

  it('wait while a statement is out, then leave together in the next (group commit)', async () => {
    const { store, names, gate } = recordingStore();
    const hashes = await Promise.all([0, 1, 2, 3].map((i) => issueFamily(db.pool, store, email(`g${i}`))));
    names.length = 0;
    let release = () => {};
    gate.wait = new Promise<void>((r) => {
      release = r;
    });
    const first = rotateToken(store, hashes[0]!);
    // Three more, each in a later turn of the loop, while the first statement is held.
    const later: ReturnType<typeof rotateToken>[] = [];
    for (const h of hashes.slice(1)) {
      await new Promise((r) => setImmediate(r));
      later.push(rotateToken(store, h));
    }
    await new Promise((r) => setImmediate(r));
    expect(names).toEqual(['refresh_rotate_ent']);
    gate.wait = undefined;
    release();
    expect((await first).out.kind).toBe('rotated');
    const outs = await Promise.all(later);
    expect(outs.map((o) => o.out.kind)).toEqual(['rotated', 'rotated', 'rotated']);
    expect(names).toEqual(['refresh_rotate_ent', 'refresh_rotate_batch_ent']);
  });

  it('settle each token as it would alone: refused, DPoP-bound, wrong client, named twice', async () => {
    const { store, names } = recordingStore({ retrySeconds: 10 });
    const plain = await issueFamily(db.pool, store, email('plain'));
    const twice = await issueFamily(db.pool, store, email('twice'));
    const revokedFamily = randomUUID();
    const revoked = await issueFamily(db.pool, store, email('revoked'), { familyId: revokedFamily });
    await db.pool.query(`UPDATE platform.refresh_families SET revoked_at = now() WHERE id = $1`, [
      revokedFamily,
    ]);
    const blocked = email('blocked');
    const blockedHash = await issueFamily(db.pool, store, blocked);
    await db.pool.query(`INSERT INTO platform.user_blocks (email, blocked_by) VALUES ($1, 't')`, [blocked]);
    const bound = await issueFamily(db.pool, store, email('bound'), { dpopJkt: 'jkt-A' });
    const boundNoKey = await issueFamily(db.pool, store, email('bound2'), { dpopJkt: 'jkt-B' });
    const otherClient = await issueFamily(db.pool, store, email('other'));
    const narrowed = await issueFamily(db.pool, store, email('narrow'));

    names.length = 0;
    const [a, b1, b2, r, bl, d, dn, oc] = await Promise.all([
      rotateToken(store, plain),
      rotateToken(store, twice),
      rotateToken(store, twice),
      rotateToken(store, revoked),
      rotateToken(store, blockedHash),
      rotateToken(store, bound, { dpopJkt: 'jkt-A' }),
      rotateToken(store, boundNoKey, { dpopJkt: 'jkt-other' }),
      rotateToken(store, otherClient, { clientId: 'someone-else' }),
    ]);
    const wide = store.rotate(narrowed, 'platform-cli', newRefreshToken().token, {
      jti: randomUUID(),
      grantType: 'refresh_token',
      scope: 'openid mcp:mail',
    });
    expect(names[0]).toBe('refresh_rotate_batch_ent');
    expect(a.out.kind).toBe('rotated');
    expect(d.out.kind).toBe('rotated');
    expect(d.out.kind === 'rotated' && d.out.grant.dpopJkt).toBe('jkt-A');
    // The token named twice: its row is rotated once by the batch; the other presentation takes the slow path
    // and, inside the retry window, gets a sibling successor, as two processes of a client racing would.
    expect([b1.out.kind, b2.out.kind]).toEqual(['rotated', 'rotated']);
    expect(b1.next).not.toBe(b2.next);
    expect(r.out).toEqual({ kind: 'invalid', reason: 'refresh token is revoked' });
    expect(bl.out).toEqual({ kind: 'invalid', reason: 'the user is blocked' });
    expect(dn.out).toEqual({
      kind: 'invalid',
      reason: 'refresh token is DPoP-bound: a proof by its key is required',
    });
    expect(oc.out).toEqual({ kind: 'invalid', reason: 'refresh token was issued to another client' });
    expect(await wide).toEqual({ kind: 'scope_exceeded', grantScope: 'openid email mcp:deals' });
    // The refused ones changed nothing: the revoked and blocked tokens were not rotated.
    const live = await db.pool.query(
      `SELECT count(*)::int AS n FROM platform.refresh_tokens WHERE token_hash = ANY($1) AND rotated_to IS NULL`,
      [[revoked, blockedHash, boundNoKey, otherClient, narrowed]],
    );
    expect(live.rows[0].n).toBe(5);
  });

  it('that the server refuses are tried one by one, each getting what it would alone', async () => {
    const { store, names } = recordingStore();
    const x = await issueFamily(db.pool, store, email('x'));
    const y = await issueFamily(db.pool, store, email('y'));
    const z = await issueFamily(db.pool, store, email('z'));
    // x and y name the same successor hash: the batch breaks the unique index and is rolled back whole.
    const clash = newRefreshToken().token;
    names.length = 0;
    const settled = await Promise.allSettled([
      rotateToken(store, x, { next: clash }),
      rotateToken(store, y, { next: { id: randomUUID(), hash: clash.hash } }),
      rotateToken(store, z),
    ]);
    expect(names[0]).toBe('refresh_rotate_batch_ent');
    expect(names.filter((n) => n === 'refresh_rotate_ent')).toHaveLength(3);
    const [sx, sy, sz] = settled;
    expect(sz.status === 'fulfilled' && sz.value.out.kind).toBe('rotated');
    // One of the two clashing rotations commits alone; the other fails as it would alone (23505).
    const outcomes = [sx, sy].map((s) =>
      s.status === 'fulfilled' ? s.value.out.kind : (s.reason as { code?: string }).code,
    );
    expect(outcomes.sort()).toEqual(['23505', 'rotated']);
  });
});

describe('a batch and a revocation taking the same families', () => {
  // A revocation locks a user's families in id order (revokeFamilies). A batch that locked them in the order its
  // requests came, a later id first, could hold that one while waiting for an earlier id the revocation holds,
  // the revocation waiting for the later one: a deadlock, and Postgres aborts one of the two after its
  // deadlock_timeout (CI once read revoke-user's 500 in test/security/concurrent-refresh-races). Forced here:
  // a third transaction holds the earlier family while the revocation, then the batch (the later family's token
  // first), queue behind it.
  it('lock them in one order: the revocation completes and the batch is not refused', async () => {
    const { store, names } = recordingStore();
    const who = email('race');
    const [a, b] = [randomUUID(), randomUUID()].sort();
    const hashA = await issueFamily(db.pool, store, who, { familyId: a });
    const hashB = await issueFamily(db.pool, store, who, { familyId: b });
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM platform.refresh_families WHERE id = $1 FOR NO KEY UPDATE', [a]);
      const revoked = inTransaction(db.pool, (tx) =>
        store.revokeFamilies(tx, { email: who, userIds: [], subjects: [] }, 'test'),
      );
      await lockWaiters(db.pool, 1);
      names.length = 0;
      const rotations = Promise.all([rotateToken(store, hashB), rotateToken(store, hashA)]);
      await lockWaiters(db.pool, 2);
      await holder.query('ROLLBACK');
      const settled = await Promise.allSettled([revoked, rotations]);
      expect(settled[0].status === 'rejected' && String(settled[0].reason)).toBe(false);
      expect(settled[0].status === 'fulfilled' && settled[0].value.familyIds.sort()).toEqual([a, b]);
      // One statement for the two, not refused by the server and tried again one by one.
      expect(names).toEqual(['refresh_rotate_batch_ent']);
      const outs = settled[1].status === 'fulfilled' ? settled[1].value.map((o) => o.out) : settled[1].reason;
      expect(outs).toEqual([
        { kind: 'invalid', reason: 'refresh token is revoked' },
        { kind: 'invalid', reason: 'refresh token is revoked' },
      ]);
    } finally {
      holder.release();
    }
  });
});

describe('the rotating statements on a table never analyzed', () => {
  /** Every scan of refresh_tokens in an EXPLAIN (ANALYZE, FORMAT JSON) plan. */
  function tokenScans(plan: Record<string, unknown>, out: Array<Record<string, unknown>> = []) {
    if (plan['Relation Name'] === 'refresh_tokens' && String(plan['Node Type']).includes('Scan'))
      out.push(plan);
    for (const p of (plan.Plans as Array<Record<string, unknown>> | undefined) ?? []) tokenScans(p, out);
    return out;
  }

  it('read the rotated tokens by hash, not every live token (the partial indexes built empty)', async () => {
    // A database of its own: its tables as a fresh install has them.
    const fresh = await createTestDatabase();
    const store = createRefreshTokenStore(fresh.pool, { retrySeconds: 10 });
    await fresh.pool.query('ALTER TABLE platform.refresh_tokens SET (autovacuum_enabled = false)');
    const sql = rotationStatements(undefined);
    const c = await fresh.pool.connect();
    try {
      await c.query(`PREPARE one AS ${sql.fastRotateWithEnt}`);
      await c.query(`PREPARE many AS ${sql.batchRotateWithEnt}`);
      const chain = await issueFamily(fresh.pool, store, email('chain'));
      const trio = [email('t1'), email('t2'), email('t3')];
      let hashes = await Promise.all(trio.map((e) => issueFamily(fresh.pool, store, e)));
      let hash = chain;
      // Past the first five executions: the plan Postgres then keeps may be its generic one.
      for (let i = 0; i < 8; i++) {
        const next = newRefreshToken().token;
        const explain = i === 7 ? 'EXPLAIN (ANALYZE, FORMAT JSON) ' : '';
        // EXECUTE takes no bind parameters: the values are written as literals (uuid[] where the batch says so).
        const lit = (v: unknown, type = 'text'): string =>
          v === null
            ? 'NULL'
            : Array.isArray(v)
              ? `ARRAY[${v.map((x) => lit(x)).join(', ')}]::${type}[]`
              : c.escapeLiteral(String(v));
        const one = await c.query(
          `${explain}EXECUTE one(${[
            hash,
            next.id,
            next.hash,
            randomUUID(),
            'refresh_token',
            null,
            'platform-cli',
            null,
          ]
            .map((v) => lit(v))
            .join(', ')})`,
        );
        const nexts = trio.map(() => newRefreshToken().token);
        const columns = [
          hashes,
          nexts.map((n) => n.id),
          nexts.map((n) => n.hash),
          trio.map(() => randomUUID()),
          trio.map(() => 'refresh_token'),
          trio.map(() => null),
          trio.map(() => 'platform-cli'),
          trio.map(() => null),
        ];
        const many = await c.query(
          `${explain}EXECUTE many(${columns.map((col, k) => lit(col, k === 1 || k === 3 ? 'uuid' : 'text')).join(', ')})`,
        );
        if (i < 7) {
          expect(one.rows).toHaveLength(1);
          expect(many.rows).toHaveLength(3);
          hash = next.hash;
          hashes = nexts.map((n) => n.hash);
          if (i < 6) continue;
          // The plans are made and kept while the table is small; then it grows by 3000 live tokens of other
          // sign-ins, never analyzed (autovacuum is off for the table: the premise stays true).
          await fresh.pool.query(`
          WITH f AS (
            INSERT INTO platform.refresh_families (id, user_id, subject, email, client_id)
            SELECT gen_random_uuid(), 'u' || i, 's' || i, 'seed' || i || '@example.com', 'platform-cli'
              FROM generate_series(1, 3000) i RETURNING id, user_id, subject, email)
          INSERT INTO platform.refresh_tokens
                 (id, token_hash, family_id, user_id, subject, email, client_id, scope, auth_time, expires_at)
          SELECT gen_random_uuid(), 'seed-' || f.id, f.id, f.user_id, f.subject, f.email, 'platform-cli', 'openid',
                 0, now() + interval '1 day' FROM f`);
          const stats = await fresh.pool.query(
            `SELECT reltuples FROM pg_class WHERE oid = 'platform.refresh_tokens'::regclass`,
          );
          expect(Number(stats.rows[0].reltuples)).toBe(-1);
          continue;
        }
        for (const result of [one, many]) {
          const scans = tokenScans(result.rows[0]['QUERY PLAN'][0].Plan);
          expect(scans.length).toBeGreaterThan(0);
          for (const s of scans) {
            expect(s['Rows Removed by Filter'] ?? 0, `${s['Node Type']} ${s['Index Name'] ?? ''}`).toBe(0);
            expect(
              Number(s['Actual Rows']),
              `${s['Node Type']} ${s['Index Name'] ?? ''}`,
            ).toBeLessThanOrEqual(1);
          }
        }
      }
    } finally {
      c.release();
      await fresh.drop();
    }
  });
});
