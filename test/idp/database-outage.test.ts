// Postgres down → 503 temporarily_unavailable, never a 500 or a crash; back up → the provider recovers by
// itself. Runs on a cluster of its own: the machine's shared Postgres is never stopped.
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MIGRATION_SETS } from '../../cli/migrations.ts';
import { migrate } from '../../lib/migrate.ts';
import { seedUser } from '../helpers/database.ts';
import { authorizeRequest, exchangeCode, obtainCode, refresh } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../helpers/throwaway-postgres.ts';

let pgServer: ThrowawayPostgres;
let idp: IdpProcess;
let pool: pg.Pool;

beforeAll(async () => {
  pgServer = await startThrowawayPostgres();
  pool = new pg.Pool({ connectionString: pgServer.url, max: 2 });
  await pool.query(await readFile(new URL('../../idp/authjs/schema.sql', import.meta.url), 'utf8'));
  await migrate(pool, MIGRATION_SETS);
  idp = await startIdpProcess({ databaseUrl: pgServer.url, redisUrl: inject('redisUrl') });
}, 120_000);

afterAll(async () => {
  await idp?.stop();
  await pool?.end().catch(() => {});
  pgServer?.destroy();
});

describe('database outage', () => {
  it('answers 503 temporarily_unavailable while Postgres is down and recovers when it returns', async () => {
    const user = await seedUser(pool);
    const c = await obtainCode({ issuer: idp.issuer, sessionToken: user.sessionToken });
    const t = await exchangeCode(idp.issuer, c);
    expect(t.status).toBe(200);
    await pool.end();

    pgServer.stop();
    const r = await refresh(idp.issuer, t.json.refresh_token as string);
    expect(r.status).toBe(503);
    expect(r.json.error).toBe('temporarily_unavailable');
    expect(r.res.headers.get('retry-after')).toBeTruthy();
    // Authorize must read the web session: unavailable too, and said so rather than sent to a login page.
    const a = await authorizeRequest({ issuer: idp.issuer, sessionToken: user.sessionToken });
    expect(a.status).toBe(503);
    // Static documents need no database and keep answering.
    expect((await fetch(`${idp.issuer}/.well-known/jwks.json`)).status).toBe(200);
    expect(idp.child.exitCode).toBeNull();

    pgServer.start();
    await expect
      .poll(async () => (await refresh(idp.issuer, t.json.refresh_token as string)).status, {
        timeout: 15_000,
        interval: 250,
      })
      .toBe(200);
    expect(idp.output()).not.toMatch(/"level":50.*unexpected error/);
  });
});
