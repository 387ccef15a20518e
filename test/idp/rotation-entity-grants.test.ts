// Without PLATFORM_ROLES_SQL a refresh reads the user's entity grants inside its rotating statement
// (RefreshStoreOptions.entityGrantsByEmail): the same rows the separate read (idp/entity-grants claims()) finds,
// one round trip fewer. Held here to that read, row for row; an email that does not lowercase to itself, a
// caller's transaction or the option off leave the read to the caller.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEntityGrants, entClaims } from '../../idp/entity-grants/entity-grants.ts';
import { createRefreshTokenStore, type RefreshTokenStore } from '../../idp/store/refresh-tokens.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
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
