// Rotation as the spec describes it: old and new keys published together, the new kid signs, and the
// published set never carries a private member.
import { createRemoteJWKSet, decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, seedUser, type TestDatabase } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

let db: TestDatabase;
let idp: IdpProcess;

beforeAll(async () => {
  db = await createTestDatabase();
  const jwk = async (kid: string) => ({
    ...(await exportJWK((await generateKeyPair('RS256', { extractable: true })).privateKey)),
    kid,
  });
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_OIDC_PRIVATE_KEY: JSON.stringify([await jwk('2026-11'), await jwk('2026-05')]) },
  });
});

afterAll(async () => {
  await idp?.stop();
  await db?.drop();
});

describe('signing keys from a JWK array', () => {
  it('publishes every key, public members only, and signs with the first', async () => {
    const res = await fetch(`${idp.issuer}/.well-known/jwks.json`);
    const text = await res.text();
    const set = JSON.parse(text) as { keys: Array<Record<string, unknown>> };
    expect(set.keys.map((k) => k.kid)).toEqual(['2026-11', '2026-05']);
    for (const k of set.keys) {
      expect(Object.keys(k).sort()).toEqual(['alg', 'e', 'kid', 'kty', 'n', 'use']);
      expect(k).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig' });
    }
    expect(text).not.toMatch(/"(d|p|q|dp|dq|qi)"\s*:/);

    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken);
    expect(decodeProtectedHeader(t.access_token).kid).toBe('2026-11');
    expect(decodeProtectedHeader(t.id_token!).kid).toBe('2026-11');
    await jwtVerify(t.access_token, createRemoteJWKSet(new URL(`${idp.issuer}/.well-known/jwks.json`)), {
      issuer: idp.issuer,
      audience: idp.audience,
    });
  });
});
