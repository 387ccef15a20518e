// `platform admin keys` and `keys rotate [--emergency]` against a real IdP with PLATFORM_KEY_ROTATION=auto (a
// long schedule, so only the commands change anything), the audit of key events, and start-up with a wrong
// encryption key or with a static key to import.

import { createPrivateKey, createPublicKey } from 'node:crypto';
import { calculateJwkThumbprint, decodeProtectedHeader, exportJWK } from 'jose';
import { describe, expect, inject, it } from 'vitest';
import { createTestDatabase } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { freePort, startIdpProcess, startPlatform, testSigningKeyPem } from '../helpers/processes.ts';
import { adminStack } from './admin-support.ts';

const ENCRYPTION_KEY = 'cli-test-key-encryption-secret-0123456789abcdef';
const ROTATION = {
  PLATFORM_OIDC_PRIVATE_KEY: '',
  PLATFORM_KEY_ROTATION: 'auto',
  PLATFORM_KEY_ENCRYPTION_KEY: ENCRYPTION_KEY,
  PLATFORM_KEY_PUBLISH_AHEAD: '1h',
  PLATFORM_KEY_LIFETIME: '30d',
};

const st = adminStack(ROTATION);

interface Row {
  kid: string;
  state: string;
  origin: string;
  withdrawn_at: string | null;
}
const list = async (): Promise<Row[]> => JSON.parse((await st.admin(['keys', '--json'])).stdout);
const jwksKids = async () =>
  (
    (await (await fetch(`${st.idp.issuer}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> }
  ).keys
    .map((k) => k.kid)
    .sort();

describe('platform admin keys with rotation', () => {
  it('lists the first key, created at start-up, as current', async () => {
    const rows = await list();
    expect(rows).toMatchObject([{ state: 'current', origin: 'initial', withdrawn_at: null }]);
    const table = (await st.admin(['keys'])).stdout;
    expect(table).toMatch(
      /^kid\s+state\s+origin\s+published since\s+activated\s+retired\s+unpublished at\s+withdrawn\n/,
    );
  });

  it('rotate publishes a next key that does not sign yet; asked again, it answers the same key', async () => {
    const [current] = await list();
    const r = await st.admin(['keys', 'rotate']);
    expect(r.code).toBe(0);
    const m = /^key (\S+) published; it signs from (\S+)\n$/.exec(r.stdout);
    expect(m).not.toBeNull();
    const next = m![1]!;
    expect(Date.parse(m![2]!) - Date.now()).toBeGreaterThan(3500_000);
    expect(await jwksKids()).toEqual([current!.kid, next].sort());
    const t = await signIn(st.idp.issuer, st.root.sessionToken);
    expect(decodeProtectedHeader(t.access_token).kid).toBe(current!.kid);
    expect((await list()).map((k) => k.state)).toEqual(['current', 'next']);

    const again = await st.admin(['keys', 'rotate']);
    expect(again.stdout).toBe(`key ${next} is already published as the next key; it signs from ${m![2]}\n`);
  });

  it('--emergency: a new key signs at once, every other key is withdrawn and refused by the IdP itself', async () => {
    const before = await list();
    const t = await signIn(st.idp.issuer, st.root.sessionToken, { scope: 'openid email' });
    const userinfo = (token: string) =>
      fetch(`${st.idp.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${token}` } });
    expect((await userinfo(t.access_token)).status).toBe(200);

    const r = await st.admin(['keys', 'rotate', '--emergency', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { kid: string; withdrawn: string[]; emergency: boolean };
    expect(out.emergency).toBe(true);
    expect(out.withdrawn.sort()).toEqual(before.map((k) => k.kid).sort());
    expect(await jwksKids()).toEqual([out.kid]);
    expect((await userinfo(t.access_token)).status).toBe(401);
    const fresh = await signIn(st.idp.issuer, st.root.sessionToken, { scope: 'openid email platform:admin' });
    expect(decodeProtectedHeader(fresh.access_token).kid).toBe(out.kid);
    // The CLI's own token was signed by a withdrawn key: it is refused like every other.
    expect((await st.admin(['keys', '--json'])).code).toBe(1);
    const after: Row[] = JSON.parse((await st.admin(['keys', '--json'], fresh.access_token)).stdout);
    expect(
      after
        .filter((k) => k.state === 'withdrawn')
        .map((k) => k.kid)
        .sort(),
    ).toEqual(out.withdrawn.sort());
    expect(after.find((k) => k.kid === out.kid)).toMatchObject({ state: 'current', origin: 'emergency' });

    const audit = await st.db.pool.query<{ action: string; target: string; actor_email: string }>(
      `SELECT action, target, actor_email FROM platform.admin_audit WHERE action LIKE 'key-%' ORDER BY id`,
    );
    expect(audit.rows).toEqual(
      expect.arrayContaining([
        { action: 'key-created', target: before[0]!.kid, actor_email: 'system' },
        { action: 'key-created', target: before[1]!.kid, actor_email: st.root.email },
        ...out.withdrawn.map((kid) => ({ action: 'key-withdrawn', target: kid, actor_email: st.root.email })),
        { action: 'key-created', target: out.kid, actor_email: st.root.email },
        { action: 'key-activated', target: out.kid, actor_email: st.root.email },
      ]),
    );
  });

  it('refuses a body that is not {"emergency": boolean}', async () => {
    const fresh = await signIn(st.idp.issuer, st.root.sessionToken, { scope: 'platform:admin' });
    const res = await fetch(`${st.idp.issuer}/admin/api/keys/rotate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fresh.access_token}`, 'content-type': 'application/json' },
      body: '{"emergency":"yes"}',
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: 'invalid_request',
      error_description: 'emergency must be true or false',
    });
  });

  it('a wrong PLATFORM_KEY_ENCRYPTION_KEY stops start-up with one line naming it, no stack trace', async () => {
    const p = startPlatform(['idp'], {
      IDP_PORT: String(await freePort()),
      PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
      PLATFORM_AUDIENCE: 'https://platform.test/api',
      DATABASE_URL: st.db.url,
      REDIS_URL: inject('redisUrl'),
      ...ROTATION,
      PLATFORM_KEY_ENCRYPTION_KEY: `${ENCRYPTION_KEY}-other`,
    });
    expect(await p.exited).toBe(2);
    expect(p.output()).toMatch(
      /^platform: configuration error: PLATFORM_KEY_ENCRYPTION_KEY: the stored private key of "[^"]+" does not decrypt: a different PLATFORM_KEY_ENCRYPTION_KEY sealed it, or it was altered\n$/,
    );
  });
});

describe('switching a static key to rotation', () => {
  it('imports PLATFORM_OIDC_PRIVATE_KEY into an empty table: the same kid keeps signing', async () => {
    const db = await createTestDatabase();
    try {
      const pem = testSigningKeyPem();
      const kid = await calculateJwkThumbprint(await exportJWK(createPublicKey(createPrivateKey(pem))));
      const idp = await startIdpProcess({
        databaseUrl: db.url,
        redisUrl: inject('redisUrl'),
        env: { ...ROTATION, PLATFORM_OIDC_PRIVATE_KEY: pem },
      });
      try {
        const set = (await (await fetch(`${idp.issuer}/.well-known/jwks.json`)).json()) as {
          keys: Array<{ kid: string }>;
        };
        expect(set.keys.map((k) => k.kid)).toEqual([kid]);
        const { rows } = await db.pool.query('SELECT kid, origin FROM platform.rotating_keys');
        expect(rows).toEqual([{ kid, origin: 'imported' }]);
        // Sealed: the stored private key is not the PEM's DER.
        const sealed = await db.pool.query<{ private_key: Buffer }>(
          'SELECT private_key FROM platform.rotating_keys',
        );
        const der = createPrivateKey(pem).export({ format: 'der', type: 'pkcs8' });
        expect(sealed.rows[0]!.private_key.includes(der.subarray(40, 80))).toBe(false);
      } finally {
        await idp.stop();
      }
    } finally {
      await db.drop();
    }
  });
});
