// The grants' token responses are signed in slices of the event loop (idp/endpoints/token-response.ts over
// lib/time-slice.ts): many grants answered together do not hold the loop for all their signatures. Twenty grants
// are forty RSA-2048 signatures, far over one slice on any machine, so other work must run between them.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import type { IdpContext } from '../../idp/context.ts';
import { tokenResponse } from '../../idp/endpoints/token-response.ts';
import { JwtSigner } from '../../idp/tokens/jwt.ts';
import { fromKeyObject } from '../../idp/tokens/keys.ts';

describe('token responses', () => {
  it('are signed in slices: the loop turns between them, and every token verifies', async () => {
    const key = await fromKeyObject(generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey, 'k1');
    const signer = new JwtSigner(key);
    const ctx = {
      config: {
        issuer: 'https://idp.test',
        audience: 'https://platform.test/api',
        adminEmails: new Set<string>(),
        adminRequireDpop: false,
      },
      keyRing: { signer: () => signer },
    } as unknown as IdpContext;
    const now = Math.floor(Date.now() / 1000);
    const answered: number[] = [];
    let turns = 0;
    let counting = true;
    const tick = () => {
      turns++;
      if (counting) setImmediate(tick);
    };
    setImmediate(tick);
    const bodies = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const body = await tokenResponse(ctx, {
          grant: {
            familyId: randomUUID(),
            userId: randomUUID(),
            subject: `user-${i}`,
            email: `u${i}@example.com`,
            clientId: 'platform-cli',
            scope: 'openid email mcp:deals',
            authTime: now,
            emailVerified: true,
            dpopJkt: undefined,
          },
          scope: 'openid email mcp:deals',
          jti: randomUUID(),
          iat: now,
          refreshToken: 'r',
          nonce: undefined,
          dpopJkt: undefined,
          ent: {},
        });
        answered.push(turns);
        return body;
      }),
    );
    counting = false;
    // Answered over several turns of the loop, not all in the turn of the first.
    expect(new Set(answered).size).toBeGreaterThan(1);
    const keys = createLocalJWKSet({ keys: [key.publicJwk] });
    for (const [i, b] of bodies.entries()) {
      const at = await jwtVerify(String(b.access_token), keys, { issuer: 'https://idp.test' });
      expect(at.payload.sub).toBe(`user-${i}`);
      const id = await jwtVerify(String(b.id_token), keys, { audience: 'platform-cli' });
      expect(id.payload.email).toBe(`u${i}@example.com`);
    }
  });
});
