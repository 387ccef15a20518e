// PLATFORM_ADMIN_REQUIRE_DPOP holds against a refresh: `platform:admin` exists only on a sign-in bound from its
// start to one DPoP key. Two `platform idp` processes on one database and one Redis, the switch off and on, as an
// operator turning it on meets them: tokens and refresh tokens of the first carried to the second.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { type DpopKey, dpopSignIn, dpopTokenRequest, jwtPayload, newDpopKey } from '../helpers/dpop.ts';
import { CLI, signIn } from '../helpers/oauth.ts';
import { freePort, type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const ADMIN = 'openid email mcp:platform platform:admin';

let db: TestDatabase;
let admin: SeededUser;
/** PLATFORM_ADMIN_REQUIRE_DPOP=on, started where the IdP below ran with it off (same port, same issuer). */
let on: IdpProcess;
/** Issued with the switch off, before it was turned on: Bearer sign-ins carrying platform:admin. */
let old: { first: Awaited<ReturnType<typeof signIn>>; second: Awaited<ReturnType<typeof signIn>> };
/** What the IdP with the switch off answered the admin API for `old.first`'s access token. */
let statusBeforeSwitch: number;

beforeAll(async () => {
  db = await createTestDatabase();
  admin = await seedUser(db.pool);
  const redisUrl = inject('redisUrl');
  const env = { PLATFORM_ADMIN_EMAILS: admin.email };
  const port = await freePort();
  const before = await startIdpProcess({ databaseUrl: db.url, redisUrl, env, port });
  try {
    old = {
      first: await signIn(before.issuer, admin.sessionToken, { scope: ADMIN }),
      second: await signIn(before.issuer, admin.sessionToken, { scope: ADMIN }),
    };
    statusBeforeSwitch = (await adminGet(before, old.first.access_token)).status;
  } finally {
    await before.stop();
  }
  on = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl,
    env: { ...env, PLATFORM_ADMIN_REQUIRE_DPOP: 'on' },
    port,
  });
}, 60_000);

afterAll(async () => {
  await on?.stop();
  await db?.drop();
});

const refreshForm = (token: string, scope?: string) => ({
  grant_type: 'refresh_token',
  refresh_token: token,
  client_id: CLI,
  scope,
});
const scopesOf = (json: Record<string, unknown>) => String(json.scope).split(' ');

/** GET an admin API route at `idp` with a token, as DPoP with a proof by `key` or as Bearer. */
async function adminGet(idp: IdpProcess, token: string, key?: DpopKey) {
  const url = `${idp.issuer}/admin/api/users/${encodeURIComponent(admin.email)}`;
  const res = await fetch(url, {
    headers: key
      ? { authorization: `DPoP ${token}`, dpop: await key.proof('GET', url, { accessToken: token }) }
      : { authorization: `Bearer ${token}` },
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

describe('an unbound sign-in never gains platform:admin by refresh', () => {
  it("a Bearer sign-in's refresh token with a thief's proof and scope platform:admin: no platform:admin", async () => {
    // Made after the switch: its own token is issued without platform:admin (the family's scope keeps it).
    const bearer = await signIn(on.issuer, admin.sessionToken, { scope: ADMIN });
    expect(bearer.scope.split(' ')).not.toContain('platform:admin');
    const thief = await newDpopKey();
    const r = await dpopTokenRequest(on.issuer, refreshForm(bearer.refresh_token, ADMIN), thief);
    expect(r.status).toBe(200);
    // The refresh itself works (the user's other scopes, bound to the proof's key) — only the power is withheld.
    expect(scopesOf(r.json)).toContain('mcp:platform');
    expect(scopesOf(r.json)).not.toContain('platform:admin');
    expect(jwtPayload(String(r.json.access_token)).scope).not.toMatch(/platform:admin/);
    const api = await adminGet(on, String(r.json.access_token), thief);
    expect(api.status).toBe(403);
    expect(api.json.error).toBe('insufficient_scope');
  });

  it('a sign-in made before the switch (its token carried platform:admin), refreshed with a proof after it: none', async () => {
    expect(old.second.scope.split(' ')).toContain('platform:admin');
    const thief = await newDpopKey();
    const r = await dpopTokenRequest(on.issuer, refreshForm(old.second.refresh_token, ADMIN), thief);
    expect(r.status).toBe(200);
    expect(scopesOf(r.json)).not.toContain('platform:admin');
    // Without a proof either (the plain Bearer refresh).
    const next = await dpopTokenRequest(on.issuer, refreshForm(String(r.json.refresh_token)), undefined);
    expect(next.status).toBe(200);
    expect(scopesOf(next.json)).not.toContain('platform:admin');
  });

  it('a sign-in bound from its start keeps platform:admin on refresh by its key; another key is refused', async () => {
    const key = await newDpopKey();
    const bound = await dpopSignIn(on.issuer, admin.sessionToken, key, { scope: ADMIN });
    expect(bound.scope.split(' ')).toContain('platform:admin');
    const thief = await newDpopKey();
    const stolen = await dpopTokenRequest(on.issuer, refreshForm(bound.refresh_token, ADMIN), thief);
    expect(stolen.status).toBe(400);
    expect(stolen.json.error).toBe('invalid_grant');
    const mine = await dpopTokenRequest(on.issuer, refreshForm(bound.refresh_token, ADMIN), key);
    expect(mine.status).toBe(200);
    expect(scopesOf(mine.json)).toContain('platform:admin');
    expect((await adminGet(on, String(mine.json.access_token), key)).status).toBe(200);
  });
});

describe('turning the switch on cuts the unbound admin tokens issued before it', () => {
  it('a Bearer token with platform:admin: 200 where the switch is off, 403 insufficient_scope where it is on', async () => {
    expect(old.first.scope.split(' ')).toContain('platform:admin');
    expect(statusBeforeSwitch).toBe(200);
    const cut = await adminGet(on, old.first.access_token);
    expect(cut.status).toBe(403);
    expect(cut.json.error).toBe('insufficient_scope');
    expect(String(cut.json.error_description)).toMatch(/PLATFORM_ADMIN_REQUIRE_DPOP/);
  });
});
