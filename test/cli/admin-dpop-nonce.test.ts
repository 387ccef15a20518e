// `platform admin` with a DPoP login against an IdP that demands nonces at the admin API (PLATFORM_DPOP_NONCE=on,
// and PLATFORM_ADMIN_REQUIRE_DPOP=on so the admin power exists only on the bound sign-in): the CLI answers the
// admin API's 401 use_dpop_nonce with the nonce it was given. A real CLI and a real `platform idp`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedUser } from '../helpers/database.ts';
import { idpWithUser } from '../helpers/idp-with-user.ts';
import { sessionCookieName } from '../helpers/oauth.ts';
import { startPlatform } from '../helpers/processes.ts';
import { AUTHORIZE_URL, type ConfigHome, runPlatform, tempConfigHome } from './support.ts';

const ADMIN = 'nonce-admin@example.com';
const f = idpWithUser({
  PLATFORM_DPOP_NONCE: 'on',
  PLATFORM_ADMIN_REQUIRE_DPOP: 'on',
  PLATFORM_ADMIN_EMAILS: ADMIN,
});
let home: ConfigHome;

beforeAll(async () => {
  home = await tempConfigHome();
});
afterAll(async () => {
  await home?.cleanup();
});

describe('platform admin against an IdP that demands DPoP nonces', () => {
  it('a DPoP login reaches the admin API (the nonce challenge answered)', async () => {
    const admin = await seedUser(f.db.pool, { email: ADMIN });
    const env = { XDG_CONFIG_HOME: home.dir, PLATFORM_ISSUER: f.idp.issuer };
    const p = startPlatform(['login', '--no-browser'], env);
    await p.waitFor(AUTHORIZE_URL);
    const res = await fetch(new URL(AUTHORIZE_URL.exec(p.output())![1]!), {
      redirect: 'manual',
      headers: { cookie: `${sessionCookieName(f.idp.issuer)}=${admin.sessionToken}` },
    });
    expect(res.status).toBe(302);
    await (await fetch(res.headers.get('location')!)).text();
    expect(await p.exited).toBe(0);
    const r = await runPlatform(['admin', 'entitlements', '--json'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });
});
