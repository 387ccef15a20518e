// deploy/postgres/roles.sql: one Postgres role per component. On a throwaway cluster (roles are cluster-wide,
// so never on the shared one): the script run as an operator would (before and after the web application's
// tables exist), `platform migrate` as the owner role, then the red team's attacks made with the tool servers'
// role — plant an Auth.js session, read accounts, delete a revocation, add an entitlement — each refused with
// permission denied, while what the tool servers and the IdP need works, their real processes included.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { runPlatform } from '../cli/support.ts';
import { freePort, startIdpProcess, startPlatform } from '../helpers/processes.ts';
import {
  havePgBinaries,
  startThrowawayPostgres,
  type ThrowawayPostgres,
} from '../helpers/throwaway-postgres.ts';
import { DEPLOY_DIR, REPO_DIR } from './support.ts';

const ROLES_SQL = join(DEPLOY_DIR, 'postgres/roles.sql');
/** The tool servers' tables: every `CREATE TABLE platform.x` of the tool migrations. */
const TOOL_TABLES = readdirSync(join(REPO_DIR, 'tools/migrations'))
  .flatMap((f) => [
    ...readFileSync(join(REPO_DIR, 'tools/migrations', f), 'utf8').matchAll(/CREATE TABLE (platform\.\w+)/g),
  ])
  .map((m) => m[1]!)
  .sort();

let cluster: ThrowawayPostgres;
let superuser: string;

const urlAs = (role: string, database: string) => {
  const u = new URL(cluster.url);
  u.username = role;
  u.pathname = `/${database}`;
  return u.toString();
};

/** roles.sql through psql as the cluster's superuser, as the operator (or the bundled Postgres) runs it. */
function runRolesSql(database: string, vars: Record<string, string> = {}): string {
  const r = spawnSync(
    'psql',
    [
      '--no-psqlrc',
      '-v',
      'ON_ERROR_STOP=1',
      ...Object.entries(vars).flatMap(([k, v]) => ['-v', `${k}=${v}`]),
      '-f',
      ROLES_SQL,
      urlAs('postgres', database),
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`roles.sql failed: ${r.stderr}`);
  return r.stdout + r.stderr;
}

async function query(url: string, sql: string, params: unknown[] = []) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await c.query(sql, params);
  } finally {
    await c.end();
  }
}

/** The error code and message a statement fails with as `role` ('' when it succeeds). */
async function refusal(role: string, database: string, sql: string): Promise<string> {
  try {
    await query(urlAs(role, database), sql);
    return '';
  } catch (err) {
    return `${(err as { code?: string }).code} ${(err as Error).message}`;
  }
}

async function migrateAs(role: string, database: string) {
  const r = await runPlatform(['migrate'], { DATABASE_URL: urlAs(role, database) }, 60_000);
  expect(r.code, r.stderr).toBe(0);
}

/** Tables of the platform schema and the web application's, with what each role may do on them. */
async function privileges(database: string, role: string): Promise<Record<string, string>> {
  const { rows } = await query(
    superuser.replace(/\/postgres$/, `/${database}`),
    `SELECT c.oid::regclass::text AS t,
            concat_ws(',', CASE WHEN has_table_privilege($1, c.oid, 'SELECT') THEN 'select' END,
                           CASE WHEN has_table_privilege($1, c.oid, 'INSERT') THEN 'insert' END,
                           CASE WHEN has_table_privilege($1, c.oid, 'UPDATE') THEN 'update' END,
                           CASE WHEN has_table_privilege($1, c.oid, 'DELETE') THEN 'delete' END) AS p
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind = 'r' AND n.nspname IN ('platform', 'public')`,
    [role],
  );
  return Object.fromEntries(rows.map((r) => [r.t as string, r.p as string]));
}

const DML = 'select,insert,update,delete';

beforeAll(async () => {
  if (!havePgBinaries()) throw new Error('No initdb: install Debian\'s "postgresql" package');
  cluster = await startThrowawayPostgres();
  superuser = cluster.url;
  for (const db of ['fresh', 'adopted']) await query(superuser, `CREATE DATABASE ${db}`);
}, 60_000);

afterAll(() => cluster?.destroy());

describe('a fresh database: roles first (the bundled Postgres), then the web application, then migrate', () => {
  const db = 'fresh';
  beforeAll(async () => {
    const first = runRolesSql(db, { migrate_password: 'm', idp_password: 'i', tools_password: 't' });
    // The web application's tables do not exist yet: said, not failed.
    expect(first).toMatch(/no table users yet/);
    await query(urlAs('postgres', db), readFileSync(join(REPO_DIR, 'idp/authjs/schema.sql'), 'utf8'));
    expect(runRolesSql(db)).not.toMatch(/no table/);
    await migrateAs('platform_migrate', db);
  }, 60_000);

  it('the migrating role owns the schema and every table in it', async () => {
    const { rows } = await query(
      urlAs('postgres', db),
      `SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'platform' UNION SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'platform'`,
    );
    expect(rows.map((r) => r.owner)).toEqual(['platform_migrate']);
  });

  it('tool servers: their own tables and `users` only', async () => {
    const p = await privileges(db, 'platform_tools');
    expect(TOOL_TABLES.length).toBeGreaterThan(0);
    const allowed = Object.entries(p)
      .filter(([, v]) => v !== '')
      .map(([t, v]) => `${t} ${v}`)
      .sort();
    expect(allowed).toEqual([...TOOL_TABLES.map((t) => `${t} ${DML}`), 'users select'].sort());
  });

  it('the IdP: every table of the platform schema, and reads users, accounts, sessions', async () => {
    const p = await privileges(db, 'platform_idp');
    for (const [t, v] of Object.entries(p)) {
      if (t.startsWith('platform.')) expect(v, t).toBe(DML);
    }
    expect([p.users, p.accounts, p.sessions, p.verification_token]).toEqual([
      'select',
      'select',
      'select',
      '',
    ]);
  });

  it("replays the attacks with the tool servers' role: each refused with permission denied", async () => {
    const denied = /^42501 permission denied/;
    const attacks = {
      'plant an Auth.js session': `INSERT INTO sessions ("userId", expires, "sessionToken") VALUES (1, now() + interval '1 day', 'planted')`,
      'read the sessions': 'SELECT "sessionToken" FROM sessions',
      'read the accounts': 'SELECT * FROM accounts',
      'delete the revocations': 'DELETE FROM platform.revocations',
      'add an entitlement': `INSERT INTO platform.entitlement_grants (email, service, granted_by) VALUES ('x@y.z', 'deals', 'x')`,
      'read the refresh tokens': 'SELECT * FROM platform.refresh_tokens',
      'register a client': `UPDATE platform.oauth_clients SET redirect_uris = '{}'`,
      'create a table in the schema': 'CREATE TABLE platform.planted (x int)',
      'run the migrations': 'SELECT * FROM platform.schema_migrations',
    };
    for (const [attack, sql] of Object.entries(attacks)) {
      expect(await refusal('platform_tools', db, sql), attack).toMatch(denied);
    }
    // What they do need still works.
    expect(await refusal('platform_tools', db, 'SELECT email FROM users')).toBe('');
    expect(await refusal('platform_tools', db, 'SELECT count(*) FROM platform.deal_artifacts')).toBe('');
  });

  it('the IdP and a tool server start on their roles (start-up probes included)', async () => {
    const idp = await startIdpProcess({
      databaseUrl: urlAs('platform_idp', db),
      redisUrl: inject('redisUrl'),
    });
    const port = await freePort();
    const tool = startPlatform(['tool', 'deals'], {
      DATABASE_URL: urlAs('platform_tools', db),
      TOOL_IDENTITY_KEY: deriveIdentityKey('database-roles-test-secret-0123456789abcdef', 'deals'),
      DEALS_MCP_PORT: String(port),
    });
    try {
      await tool.waitFor(/deals tool server listening/, 20_000);
      expect((await fetch(`${idp.url}/.well-known/openid-configuration`)).status).toBe(200);
    } finally {
      await Promise.all([idp.stop(), tool.stop()]);
    }
  }, 60_000);
});

describe('an installation migrated before it had roles: roles.sql adopts it', () => {
  const db = 'adopted';
  beforeAll(async () => {
    await query(urlAs('postgres', db), readFileSync(join(REPO_DIR, 'idp/authjs/schema.sql'), 'utf8'));
    await migrateAs('postgres', db);
    runRolesSql(db);
    // The owner role migrates from now on (nothing left to apply; CREATE SCHEMA IF NOT EXISTS passes).
    await migrateAs('platform_migrate', db);
  }, 60_000);

  it('hands the tables to the migrating role and grants as on a fresh database', async () => {
    const { rows } = await query(
      urlAs('postgres', db),
      `SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'platform'`,
    );
    expect(rows.map((r) => r.owner)).toEqual(['platform_migrate']);
    expect(await privileges(db, 'platform_tools')).toEqual(await privileges('fresh', 'platform_tools'));
    expect(await privileges(db, 'platform_idp')).toEqual(await privileges('fresh', 'platform_idp'));
  });
});
