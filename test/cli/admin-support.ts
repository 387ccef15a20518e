// Shared by the `platform admin` tests: a real `platform idp` with one administrator, and the CLI run as an
// administrator runs it (no database or Redis access from the CLI: everything goes through the admin API).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, inject } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { runPlatform, tempConfigHome } from './support.ts';

export interface AdminStack {
  db: TestDatabase;
  idp: IdpProcess;
  redis: Redis;
  /** The administrator (in PLATFORM_ADMIN_EMAILS) and an access token of theirs with platform:admin. */
  root: SeededUser;
  adminToken: string;
  home: Awaited<ReturnType<typeof tempConfigHome>>;
  /** `platform admin <args>` with the administrator's token (or `token`). */
  admin(args: string[], token?: string): ReturnType<typeof runPlatform>;
  /** A request to `/admin/api/<path>` with the administrator's token. */
  api(path: string, init?: RequestInit): Promise<{ status: number; headers: Headers; text: string }>;
}

/** Registers beforeAll/afterAll for the file and returns the stack they fill; `env` goes to the IdP. */
export function adminStack(env: Record<string, string> = {}): AdminStack {
  const s = {} as AdminStack;
  beforeAll(async () => {
    [s.db, s.home] = await Promise.all([createTestDatabase(), tempConfigHome()]);
    s.root = await seedUser(s.db.pool);
    s.idp = await startIdpProcess({
      databaseUrl: s.db.url,
      redisUrl: inject('redisUrl'),
      env: { PLATFORM_ADMIN_EMAILS: s.root.email, ...env },
    });
    s.redis = new Redis(inject('redisUrl'));
    s.adminToken = (
      await signIn(s.idp.issuer, s.root.sessionToken, { scope: 'openid email platform:admin' })
    ).access_token;
  });
  afterAll(async () => {
    s.redis?.disconnect();
    await s.idp?.stop();
    await s.db?.drop();
    await s.home?.cleanup();
  });
  s.admin = (args, token = s.adminToken) =>
    runPlatform(['admin', ...args], {
      HOME: s.home.dir,
      PLATFORM_ISSUER: s.idp.issuer,
      PLATFORM_TOKEN: token,
    });
  s.api = async (path, init = {}) => {
    const res = await fetch(`${s.idp.issuer}/admin/api/${path}`, {
      ...init,
      headers: { authorization: `Bearer ${s.adminToken}`, ...init.headers },
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };
  return s;
}
