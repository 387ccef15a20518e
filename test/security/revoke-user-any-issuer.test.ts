// Attack: an administrator revokes a user, and the user carries on with tokens the platform IdP never issued —
// a service's HS256 token or an Entra token with the same email. End to end: revoke-user through the IdP's
// admin API (real IdP process), a real gateway on the suite's Redis; the user's platform, HS256 and Entra
// tokens are all refused with token_revoked, another user's are not.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  type EntraTenant,
  errorOf,
  type GatewayProcess,
  gatewayEnv,
  mailServiceToken,
  postMail,
  startEntra,
  startGatewayProcess,
  startUpstream,
  type Upstream,
} from '../gateway/helpers.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const TENANT = randomUUID();
const CLIENT_ID = randomUUID();
const BASE = 'https://mcp.revoke-user.test';
const APP_ID_URI = `${BASE}/mail/mcp`;
const SECRET = 'revoke-user-test-mail-shared-secret-0123456789';

let db: TestDatabase;
let idp: IdpProcess;
let admin: SeededUser;
let entra: EntraTenant;
let upstream: Upstream;
let gateway: GatewayProcess;

beforeAll(async () => {
  db = await createTestDatabase();
  admin = await seedUser(db.pool);
  [idp, entra, upstream] = await Promise.all([
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl: inject('redisUrl'),
      env: { PLATFORM_ADMIN_EMAILS: admin.email },
    }),
    startEntra(TENANT, CLIENT_ID),
    startUpstream(),
  ]);
  gateway = await startGatewayProcess(
    gatewayEnv(
      { base: BASE, services: { mail: upstream.url }, platform: idp, entra, redisUrl: inject('redisUrl') },
      { MAIL_MCP_SHARED_SECRET: SECRET },
    ),
  );
});

afterAll(async () => {
  await gateway?.stop();
  await idp?.stop();
  await Promise.all([entra?.close(), upstream?.close()]);
  await db?.drop();
});

const now = () => Math.floor(Date.now() / 1000);

const hs256 = (email: string) => mailServiceToken(SECRET, APP_ID_URI, { email, iat: now() - 5 });

const entraToken = (email: string) => entra.token({ preferred_username: email }, -5);

const post = (t: string) => postMail(gateway, t);

describe('revoke-user through the admin API reaches every issuer', () => {
  it("refuses the user's platform, HS256 and Entra tokens at the gateway; another user's pass", async () => {
    const victim = await seedUser(db.pool);
    const bystander = await seedUser(db.pool);
    const tokens = {
      platform: (await signIn(idp.issuer, victim.sessionToken, { scope: 'mcp:mail' })).access_token,
      hs256: await hs256(victim.email.toUpperCase()),
      entra: await entraToken(victim.email),
    };
    const others = [await hs256(bystander.email), await entraToken(bystander.email)];
    for (const t of [...Object.values(tokens), ...others]) expect((await post(t)).status).toBe(200);

    const adminToken = (await signIn(idp.issuer, admin.sessionToken, { scope: 'platform:admin' }))
      .access_token;
    const r = await fetch(`${idp.issuer}/admin/api/revoke-user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${adminToken}` },
      body: JSON.stringify({ email: victim.email }),
    });
    expect(r.status).toBe(200);

    await expect.poll(async () => (await post(tokens.hs256)).status).toBe(401);
    for (const [kind, t] of Object.entries(tokens)) {
      const res = await post(t);
      expect(res.status, kind).toBe(401);
      expect(errorOf(res), kind).toMatchObject({ code: 'INVALID_TOKEN', reason: 'token_revoked' });
    }
    for (const t of others) expect((await post(t)).status).toBe(200);
  });
});
