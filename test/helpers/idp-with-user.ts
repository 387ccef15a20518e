// A test file's own IdP: a database, a `platform idp` process and one seeded user, started before the file's
// tests and stopped after them.
import { afterAll, beforeAll, inject } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from './database.ts';
import { type IdpProcess, startIdpProcess } from './processes.ts';

export interface IdpWithUser {
  db: TestDatabase;
  idp: IdpProcess;
  user: SeededUser;
}

/** Registers the beforeAll/afterAll; the fields are set once beforeAll has run. */
export function idpWithUser(env: Record<string, string>): IdpWithUser {
  const f = {} as IdpWithUser;
  beforeAll(async () => {
    f.db = await createTestDatabase();
    f.idp = await startIdpProcess({ databaseUrl: f.db.url, redisUrl: inject('redisUrl'), env });
    f.user = await seedUser(f.db.pool);
  }, 60_000);
  afterAll(async () => {
    await f.idp?.stop();
    await f.db?.drop();
  });
  return f;
}
