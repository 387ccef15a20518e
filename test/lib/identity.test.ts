import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { type Identity, IdentityError, signIdentity, verifyIdentity } from '../../lib/identity.ts';

// The identity signature the gateway sends and the tool servers check, held to CONTRACT.md § Identity headers
// by an independent computation of its formula.

const ID: Identity = {
  email: 'someone@example.com',
  sub: '9f0c1b2a-3d4e-5f60-7182-93a4b5c6d7e8',
  issuer: 'platform',
  scope: 'openid email mcp:deals',
  clientId: 'platform-cli',
  jti: 'd2b9e4f1-0a1b-4c2d-8e3f-405162738495',
  requestId: 'req-1',
};

/** CONTRACT.md § Identity headers, computed independently with createHmac. */
function contractSignature(secret: string | Buffer, t: number, id: Identity): string {
  const message = [t, id.email, id.sub, id.issuer, id.scope, id.clientId, id.jti, id.requestId].join('\n');
  return `t=${t},v1=${createHmac('sha256', secret).update(message).digest('hex')}`;
}

describe('signIdentity / verifyIdentity', () => {
  const secret = 'bench-identity-secret-0123456789abcdef0123';

  it('signs exactly the contract message', () => {
    const headers = signIdentity(secret, ID, 1_800_000_000);
    expect(headers['x-platform-identity']).toBe(contractSignature(secret, 1_800_000_000, ID));
    expect(headers).toMatchObject({
      'x-platform-user-email': ID.email,
      'x-platform-user-sub': ID.sub,
      'x-platform-issuer': ID.issuer,
      'x-platform-scope': ID.scope,
      'x-platform-client-id': ID.clientId,
      'x-platform-jti': ID.jti,
      'x-request-id': ID.requestId,
    });
  });

  it('verifies what it signs and rejects any changed field, another key and a stale signature', () => {
    const now = Math.floor(Date.now() / 1000);
    const headers = signIdentity(secret, ID, now);
    expect(verifyIdentity(secret, headers, now)).toEqual(ID);
    for (const name of Object.keys(headers).filter((n) => n !== 'x-platform-identity')) {
      const changed = { ...headers, [name]: `${headers[name]}x` };
      expect(() => verifyIdentity(secret, changed, now), name).toThrow(IdentityError);
    }
    expect(() => verifyIdentity('another-secret-0123456789', headers, now)).toThrow(
      'identity signature invalid',
    );
    expect(() => verifyIdentity(secret, headers, now + 61)).toThrow('identity signature expired');
  });
});
