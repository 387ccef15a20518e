// The signing-key schedule under the encryption key (migration 140): a database writer without
// PLATFORM_KEY_ENCRYPTION_KEY can neither publish an emergency-withdrawn key again nor make an old key sign, and a
// planted row that does not decrypt does not keep the IdP from starting. Real `platform idp` processes with
// PLATFORM_KEY_ROTATION=auto on one database; the attacker writes platform.rotating_keys directly, then a fresh
// replica starts and reads it.
import { randomBytes } from 'node:crypto';
import { decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { callAdminApi } from '../helpers/admin-api.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const ADMIN = 'schedule-admin@example.com';
const ENV = {
  PLATFORM_OIDC_PRIVATE_KEY: '',
  PLATFORM_KEY_ROTATION: 'auto',
  PLATFORM_KEY_ENCRYPTION_KEY: 'schedule-seal-test-encryption-secret-0123456789',
  PLATFORM_KEY_PUBLISH_AHEAD: '1h',
  PLATFORM_KEY_LIFETIME: '30d',
  PLATFORM_ADMIN_EMAILS: ADMIN,
};

let db: TestDatabase;
let admin: SeededUser;
let first: IdpProcess;
/** The key withdrawn by the emergency rotation, and the one that signs after it. */
let withdrawn: string;
let current: string;
/** A token the withdrawn key signed. */
let oldToken: string;
const started: IdpProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  admin = await seedUser(db.pool, { email: ADMIN });
  first = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl'), env: ENV });
  const t = await signIn(first.issuer, admin.sessionToken, { scope: 'platform:admin' });
  oldToken = t.access_token;
  withdrawn = decodeProtectedHeader(oldToken).kid!;
  const r = await callAdminApi(first.issuer, oldToken, 'POST', '/admin/api/keys/rotate', { emergency: true });
  expect(r.status).toBe(201);
  expect(r.json.withdrawn).toEqual([withdrawn]);
  current = String(r.json.kid);
  await first.stop();
}, 60_000);

afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await db?.drop();
});

/** A fresh replica on the database as the attacker left it: its key set, its signer, its answer to `token`. */
async function replica() {
  const idp = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl'), env: ENV });
  started.push(idp);
  const jwks = (await (await fetch(`${idp.issuer}/.well-known/jwks.json`)).json()) as {
    keys: { kid: string }[];
  };
  const signed = await signIn(idp.issuer, admin.sessionToken, { scope: 'openid' });
  const userinfo = (token: string) =>
    fetch(`${idp.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${token}` } }).then(
      (r) => r.status,
    );
  return {
    idp,
    kids: jwks.keys.map((k) => k.kid).sort(),
    signer: decodeProtectedHeader(signed.access_token).kid,
    userinfo,
  };
}

describe('the key schedule under the seal', () => {
  it('a withdrawn key published again, or made to sign, by a database writer: left out, the IdP signs on', async () => {
    await db.pool.query(
      `UPDATE platform.rotating_keys SET withdrawn_at = NULL, activate_at = now(), publish_at = now() - interval '1 minute'
        WHERE kid = $1`,
      [withdrawn],
    );
    const r = await replica();
    expect(r.kids).toEqual([current]);
    expect(r.signer).toBe(current);
    // The IdP's own endpoints refuse what the withdrawn key signed.
    expect(await r.userinfo(oldToken)).toBe(401);
    expect(r.idp.output()).toMatch(/signing key left out: its schedule .* does not match its seal/);
    await r.idp.stop();
  });

  it('a planted row that does not decrypt: the IdP starts, says so in one line, never publishes or signs with it', async () => {
    // An allowed origin and no seal, as a row of the previous release looks; the bytes are no sealed key.
    await db.pool.query(
      `INSERT INTO platform.rotating_keys (kid, public_jwk, private_key, origin, publish_at, activate_at)
       VALUES ('planted', $1, $2, 'schedule', now() - interval '1 minute', now())`,
      [JSON.stringify({ kty: 'RSA', n: 'AQAB', e: 'AQAB', kid: 'planted' }), randomBytes(64)],
    );
    const r = await replica();
    expect(r.kids).toEqual([current]);
    expect(r.signer).toBe(current);
    expect(
      r.idp
        .output()
        .match(/"kid":"planted"[^\n]*signing key left out|signing key left out[^\n]*"kid":"planted"/g),
    ).toHaveLength(1);
    await r.idp.stop();
  });

  it('a row the previous release wrote (no seal yet) is loaded and sealed as it is', async () => {
    await db.pool.query(`UPDATE platform.rotating_keys SET schedule_mac = NULL WHERE kid = $1`, [current]);
    const r = await replica();
    expect(r.signer).toBe(current);
    const { rows } = await db.pool.query<{ sealed: boolean }>(
      `SELECT schedule_mac IS NOT NULL AS sealed FROM platform.rotating_keys WHERE kid = $1`,
      [current],
    );
    expect(rows[0]!.sealed).toBe(true);
    await r.idp.stop();
  });
});
