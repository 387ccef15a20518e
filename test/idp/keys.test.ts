import { generateKeyPairSync } from 'node:crypto';
import { createLocalJWKSet, exportJWK, generateKeyPair, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { JwtSigner } from '../../idp/tokens/jwt.ts';
import { loadSigningKeys } from '../../idp/tokens/keys.ts';

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

function rsaPem(bits = 2048): string {
  return generateKeyPairSync('rsa', { modulusLength: bits }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;
}

async function rsaJwk(kid?: string) {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  return kid ? { ...jwk, kid } : jwk;
}

describe('PLATFORM_OIDC_PRIVATE_KEY', () => {
  it('reads a PKCS8 PEM, with a thumbprint kid', async () => {
    const [k] = await loadSigningKeys(rsaPem());
    expect(k!.kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(k!.publicJwk.alg).toBe('RS256');
  });

  it('reads a PEM whose newlines were escaped into one line (.env files)', async () => {
    const pem = rsaPem().replace(/\n/g, '\\n');
    expect(await loadSigningKeys(pem)).toHaveLength(1);
  });

  it('reads one private JWK and keeps its kid', async () => {
    const [k] = await loadSigningKeys(JSON.stringify(await rsaJwk('key-2026')));
    expect(k!.kid).toBe('key-2026');
  });

  it('reads a JSON array for rotation: the first signs, all are published, public members only', async () => {
    const keys = await loadSigningKeys(JSON.stringify([await rsaJwk('new'), await rsaJwk('old')]));
    expect(keys.map((k) => k.kid)).toEqual(['new', 'old']);
    for (const k of keys) {
      for (const m of PRIVATE_MEMBERS) expect(k.publicJwk).not.toHaveProperty(m);
      expect(Object.keys(k.publicJwk).sort()).toEqual(['alg', 'e', 'kid', 'kty', 'n', 'use']);
    }
    const signer = new JwtSigner(keys[0]!);
    const now = Math.floor(Date.now() / 1000);
    const token = signer.accessToken({
      iss: 'https://i',
      sub: 's',
      email: 'e@x',
      aud: 'a',
      scope: 'openid',
      azp: 'c',
      client_id: 'c',
      jti: 'j',
      iat: now,
      exp: now + 3600,
    });
    const set = createLocalJWKSet({ keys: keys.map((k) => k.publicJwk) });
    const { protectedHeader } = await jwtVerify(token, set, {
      issuer: 'https://i',
      audience: 'a',
      typ: 'at+jwt',
    });
    expect(protectedHeader.kid).toBe('new');
  });

  const bad: Array<[string, () => Promise<string> | string, RegExp]> = [
    ['garbage', () => 'not a key', /neither a PEM/],
    [
      'a public PEM',
      () =>
        generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({
          type: 'spki',
          format: 'pem',
        }) as string,
      /private key/,
    ],
    ['a 1024-bit key', () => rsaPem(1024), /too short/],
    [
      'an EC key',
      () =>
        generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({
          type: 'pkcs8',
          format: 'pem',
        }) as string,
      /RSA/,
    ],
    [
      'a public JWK',
      async () => {
        const j = await rsaJwk();
        const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...pub } = j;
        return JSON.stringify(pub);
      },
      /private member/,
    ],
    ['an empty array', () => '[]', /empty/],
    ['duplicate kids', async () => JSON.stringify([await rsaJwk('a'), await rsaJwk('a')]), /twice/],
    ['an oct JWK', () => JSON.stringify({ kty: 'oct', k: 'AAAA' }), /RSA/],
    ['a JWK with alg ES256', async () => JSON.stringify({ ...(await rsaJwk()), alg: 'ES256' }), /not RS256/],
  ];
  for (const [name, make, msg] of bad) {
    it(`refuses ${name}`, async () => {
      await expect(loadSigningKeys(await make())).rejects.toThrow(msg);
    });
  }
});
