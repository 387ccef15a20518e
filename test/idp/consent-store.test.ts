// The consent store against a real database: union on approval, list and withdraw by email.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createConsentStore } from '../../idp/store/consents.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.drop();
});

it('keeps the union of approved services per (email, client), lists and withdraws by email', async () => {
  const store = createConsentStore(db.pool);
  const email = 'Ada@Example.com';
  expect(await store.find({ email, clientId: 'c1' })).toBeUndefined();
  await store.grant({ email, clientId: 'c1', clientName: 'One', services: ['mail'] });
  const second = await store.grant({ email, clientId: 'c1', clientName: 'One', services: ['deals', 'mail'] });
  expect(second.services).toEqual(['deals', 'mail']);
  await store.grant({ email: 'ada@example.com', clientId: 'c2', clientName: 'Two', services: [] });
  const list = await store.list({ email: ' ADA@example.com ' });
  expect(list.map((c) => [c.clientId, c.clientName, c.services])).toEqual([
    ['c2', 'Two', []],
    ['c1', 'One', ['deals', 'mail']],
  ]);
  expect(list[0]!.grantedAt).toBeInstanceOf(Date);
  expect(await store.list({ email: 'someone-else@example.com' })).toEqual([]);
  expect(Object.fromEntries(await store.countByClient())).toEqual({ c1: 1, c2: 1 });
  expect(await store.withdraw({ email, clientId: 'c1' })).toBe(true);
  expect(await store.withdraw({ email, clientId: 'c1' })).toBe(false);
  expect((await store.list({ email })).map((c) => c.clientId)).toEqual(['c2']);
});
