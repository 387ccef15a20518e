// `platform dev` has no Redis: the IdP writes to an in-process store that starts empty on every start. The
// same replay that refills Redis refills it, so a restarted dev stack forgets no revocation. The IdP runs
// in-process here exactly as the dev stack starts it (startIdp with a MemoryRevocations), twice, on one database.

import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadIdpConfig } from '../../idp/config.ts';
import { type RunningIdp, startIdp } from '../../idp/server.ts';
import { createLogger } from '../../lib/logger.ts';
import { MemoryRevocations } from '../../lib/revocation.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { postForm, signIn } from '../helpers/oauth.ts';
import { freePort, testSigningKeyPem } from '../helpers/processes.ts';

let db: TestDatabase;
let admin: SeededUser;
let issuer: string;
let running: RunningIdp | undefined;

async function start(store: MemoryRevocations): Promise<RunningIdp> {
  const port = new URL(issuer).port;
  const config = loadIdpConfig(
    {
      IDP_PORT: port,
      PLATFORM_OIDC_ISSUER: issuer,
      PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
      PLATFORM_AUDIENCE: 'https://platform.test/api',
      DATABASE_URL: db.url,
      PLATFORM_ADMIN_EMAILS: admin.email,
    },
    { redisRequired: false },
  );
  return startIdp(config, {
    log: createLogger({ name: 'idp', level: 'silent' }),
    revocations: store,
    host: '127.0.0.1',
  });
}

beforeAll(async () => {
  db = await createTestDatabase();
  admin = await seedUser(db.pool);
  issuer = `http://127.0.0.1:${await freePort()}`;
});

afterAll(async () => {
  await running?.close();
  await db?.drop();
});

describe('dev stack restart (in-process revocation store)', () => {
  it('a restarted IdP refills a fresh in-process store with every live revocation', async () => {
    const first = new MemoryRevocations();
    running = await start(first);
    const user = await seedUser(db.pool);
    const other = await seedUser(db.pool);
    const t = await signIn(issuer, user.sessionToken);
    await signIn(issuer, other.sessionToken);
    const jti = decodeJwt(t.access_token).jti as string;
    expect((await postForm(`${issuer}/oauth/revoke`, { token: t.access_token })).status).toBe(200);
    const adminToken = (await signIn(issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
    const r = await fetch(`${issuer}/admin/api/revoke-user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${adminToken}` },
      body: JSON.stringify({ email: other.email }),
    });
    const { cutoff } = (await r.json()) as { cutoff: number };
    expect(first.isJtiDenied(jti)).toBe(true);
    await running.close();
    running = undefined;

    const second = new MemoryRevocations();
    expect(second.isJtiDenied(jti)).toBe(false);
    running = await start(second);
    expect(second.isJtiDenied(jti.toUpperCase())).toBe(true);
    expect(second.subjectCutoff(other.sub)).toBe(cutoff);
    expect(second.emailCutoff(other.email)).toBe(cutoff);
  });
});
