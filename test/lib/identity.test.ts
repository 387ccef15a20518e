import { createHash, createHmac, KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  bodySha256,
  deriveIdentityKey,
  hmacKey,
  type Identity,
  IdentityError,
  identityValueSha256,
  pushIdentityHeaders,
  type SignedRequest,
  signIdentity,
  verifyIdentity,
} from '../../lib/identity.ts';

// Identity signature v2, as the gateway sends it and the tool servers check it, held to the documented formula
// (docs/security.md § Identity headers) by an independent computation with createHmac/createHash.

const ID: Identity = {
  email: 'someone@example.com',
  sub: '9f0c1b2a-3d4e-5f60-7182-93a4b5c6d7e8',
  issuer: 'platform',
  scope: 'openid email mcp:deals',
  clientId: 'platform-cli',
  jti: 'd2b9e4f1-0a1b-4c2d-8e3f-405162738495',
  requestId: 'req-1',
};

const SECRET = 'bench-identity-secret-0123456789abcdef0123';
const BODY = Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/list"}');

/** The documented formula, computed independently. */
function contractKey(secret: string, service: string): string {
  return createHmac('sha256', secret).update(`platform-identity-v2:${service}`).digest('hex');
}

function contractSignature(
  secret: string,
  t: number,
  r: { service: string; method: string; path: string; body: Buffer },
  id: Identity,
): string {
  const v4 = Boolean(id.upstreamToken || id.actor);
  const v3 = !v4 && id.entitlements !== undefined;
  const version = v4 ? 'v4' : v3 ? 'v3' : 'v2';
  const sha = (v: string | undefined) =>
    createHash('sha256')
      .update(v ?? '')
      .digest('hex');
  const lines = [
    version,
    String(t),
    r.service,
    r.method,
    r.path,
    createHash('sha256').update(r.body).digest('hex'),
    id.email,
    id.sub,
    id.issuer,
    id.scope,
    id.clientId,
    id.jti,
    id.requestId,
    ...(v3 || v4 ? [sha(id.entitlements)] : []),
    ...(v4 ? [sha(id.upstreamToken), id.actor ?? ''] : []),
  ];
  // The key is the 64-character hex string itself, used as UTF-8 bytes (not the 32 bytes it encodes).
  const key = Buffer.from(contractKey(secret, r.service), 'utf8');
  return `t=${t},${version}=${createHmac('sha256', key).update(lines.join('\n')).digest('hex')}`;
}

const REQUEST = { service: 'deals', method: 'POST', path: '/deals/mcp?x=1', body: BODY };
const SIGNED: SignedRequest = {
  service: 'deals',
  method: 'POST',
  path: '/deals/mcp?x=1',
  bodySha256: bodySha256(BODY),
};

describe('deriveIdentityKey', () => {
  it('is hex(HMAC-SHA256(secret, "platform-identity-v2:" + service)), distinct per service', () => {
    expect(deriveIdentityKey(SECRET, 'deals')).toBe(contractKey(SECRET, 'deals'));
    expect(deriveIdentityKey(SECRET, 'deals')).toMatch(/^[0-9a-f]{64}$/);
    expect(deriveIdentityKey(SECRET, 'mail')).not.toBe(deriveIdentityKey(SECRET, 'deals'));
  });

  it('refuses a secret shorter than 32 characters', () => {
    expect(() => deriveIdentityKey('x'.repeat(31), 'deals')).toThrow(TypeError);
  });
});

describe('bodySha256', () => {
  it('hashes the raw bytes; an empty or absent body hashes the empty string', () => {
    const empty = createHash('sha256').update('').digest('hex');
    expect(bodySha256(null)).toBe(empty);
    expect(bodySha256(Buffer.alloc(0))).toBe(empty);
    expect(bodySha256(BODY)).toBe(createHash('sha256').update(BODY).digest('hex'));
  });
});

describe('signIdentity / verifyIdentity', () => {
  const key = deriveIdentityKey(SECRET, 'deals');

  it('signs exactly the documented message with the service key', () => {
    const headers = signIdentity(key, SIGNED, ID, 1_800_000_000);
    expect(headers['x-platform-identity']).toBe(contractSignature(SECRET, 1_800_000_000, REQUEST, ID));
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

  it('verifies what it signs and rejects any changed header, another key and a stale signature', () => {
    const now = Math.floor(Date.now() / 1000);
    const headers = signIdentity(key, SIGNED, ID, now);
    expect(verifyIdentity(key, SIGNED, headers, now)).toEqual(ID);
    for (const name of Object.keys(headers).filter((n) => n !== 'x-platform-identity')) {
      const changed = { ...headers, [name]: `${headers[name]}x` };
      expect(() => verifyIdentity(key, SIGNED, changed, now), name).toThrow(IdentityError);
    }
    expect(() => verifyIdentity(deriveIdentityKey(`${SECRET}!`, 'deals'), SIGNED, headers, now)).toThrow(
      /signature invalid/,
    );
    expect(() => verifyIdentity(key, SIGNED, headers, now + 61)).toThrow('identity signature expired');
    expect(verifyIdentity(key, SIGNED, headers, now + 60)).toEqual(ID);
  });

  it('binds the signature to the service, method, path with query and body', () => {
    const now = Math.floor(Date.now() / 1000);
    const headers = signIdentity(key, SIGNED, ID, now);
    const others: Array<[string, string, SignedRequest]> = [
      // Another service holding its own key: its key and its service line both differ.
      ['service', deriveIdentityKey(SECRET, 'mail'), { ...SIGNED, service: 'mail' }],
      // Even a tool server misconfigured with the right key but another name refuses it.
      ['service line', key, { ...SIGNED, service: 'mail' }],
      ['method', key, { ...SIGNED, method: 'DELETE' }],
      ['path', key, { ...SIGNED, path: '/deals/mcp' }],
      ['query', key, { ...SIGNED, path: '/deals/mcp?x=2' }],
      ['body', key, { ...SIGNED, bodySha256: bodySha256(Buffer.from('{}')) }],
    ];
    for (const [what, k, request] of others) {
      expect(() => verifyIdentity(k, request, headers, now), what).toThrow(/signature invalid/);
    }
  });

  it('refuses the v1 format and a missing signature', () => {
    const now = Math.floor(Date.now() / 1000);
    const headers = signIdentity(key, SIGNED, ID, now);
    const v1 = { ...headers, 'x-platform-identity': headers['x-platform-identity']!.replace(',v2=', ',v1=') };
    expect(() => verifyIdentity(key, SIGNED, v1, now)).toThrow(/malformed/);
    const { 'x-platform-identity': _, ...unsigned } = headers;
    expect(() => verifyIdentity(key, SIGNED, unsigned, now)).toThrow(/missing/);
  });
});

describe('signature v3: the forwarded entitlements', () => {
  const key = deriveIdentityKey(SECRET, 'deals');
  const ENT = Buffer.from(JSON.stringify({ 'deal:42': ['read', 'write'] })).toString('base64url');

  it('signs the documented message: v2 lines, first reading v3, plus the SHA-256 of the header (of "" when absent)', () => {
    for (const entitlements of [ENT, '']) {
      const headers = signIdentity(key, SIGNED, { ...ID, entitlements }, 1_800_000_000);
      expect(headers['x-platform-identity']).toBe(
        contractSignature(SECRET, 1_800_000_000, REQUEST, { ...ID, entitlements }),
      );
      expect(headers['x-platform-entitlements']).toBe(entitlements || undefined);
    }
  });

  it('verifies v3 with its entitlements; a changed, added or removed entitlements header is refused', () => {
    const now = Math.floor(Date.now() / 1000);
    const headers = signIdentity(key, SIGNED, { ...ID, entitlements: ENT }, now);
    expect(verifyIdentity(key, SIGNED, headers, now)).toEqual({ ...ID, entitlements: ENT });
    const forged = Buffer.from(JSON.stringify({ 'deal:43': ['write'] })).toString('base64url');
    expect(() => verifyIdentity(key, SIGNED, { ...headers, 'x-platform-entitlements': forged }, now)).toThrow(
      /signature invalid/,
    );
    const { 'x-platform-entitlements': _, ...removed } = headers;
    expect(() => verifyIdentity(key, SIGNED, removed, now)).toThrow(/signature invalid/);
    const none = signIdentity(key, SIGNED, { ...ID, entitlements: '' }, now);
    expect(() => verifyIdentity(key, SIGNED, { ...none, 'x-platform-entitlements': forged }, now)).toThrow(
      /signature invalid/,
    );
  });

  it('still accepts v2, whose entitlements header is unsigned and therefore ignored', () => {
    const now = Math.floor(Date.now() / 1000);
    const headers = signIdentity(key, SIGNED, ID, now);
    expect(headers['x-platform-identity']).toMatch(/^t=\d+,v2=/);
    const id = verifyIdentity(key, SIGNED, { ...headers, 'x-platform-entitlements': ENT }, now);
    expect(id.entitlements).toBeUndefined();
  });
});

describe('signature v4: the upstream token and the actor', () => {
  const key = deriveIdentityKey(SECRET, 'mail');
  const MAIL = { ...REQUEST, service: 'mail', path: '/mail/mcp' };
  const SIGNED_MAIL: SignedRequest = { ...SIGNED, service: 'mail', path: '/mail/mcp' };
  const ENT = Buffer.from(JSON.stringify({ 'deal:42': ['read'] })).toString('base64url');

  it('signs v3 lines, first reading v4, plus the SHA-256 of the upstream token and the actor line', () => {
    const cases: Array<Partial<Identity>> = [
      { upstreamToken: 'eyJ.upstream.token', actor: '' },
      { upstreamToken: '', actor: 'machine-client-1' },
      { upstreamToken: 'tok', actor: 'machine-client-1', entitlements: ENT },
      { upstreamToken: 'tok' },
    ];
    for (const c of cases) {
      const id = { ...ID, entitlements: '', ...c };
      const headers = signIdentity(key, SIGNED_MAIL, id, 1_800_000_000);
      expect(headers['x-platform-identity']).toMatch(/^t=1800000000,v4=[0-9a-f]{64}$/);
      expect(headers['x-platform-identity']).toBe(contractSignature(SECRET, 1_800_000_000, MAIL, id));
      expect(headers['x-platform-upstream-token']).toBe(c.upstreamToken || undefined);
      expect(headers['x-platform-actor']).toBe(c.actor || undefined);
    }
    // Neither an upstream token nor an actor: v3, as before.
    const plain = signIdentity(
      key,
      SIGNED_MAIL,
      { ...ID, entitlements: '', upstreamToken: '', actor: '' },
      1,
    );
    expect(plain['x-platform-identity']).toMatch(/^t=1,v3=/);
  });

  it('verifies v4; a changed, added or removed upstream token or actor is refused', () => {
    const now = Math.floor(Date.now() / 1000);
    const id = { ...ID, entitlements: '', upstreamToken: 'user-upstream-token', actor: 'agent-7' };
    const headers = signIdentity(key, SIGNED_MAIL, id, now);
    expect(verifyIdentity(key, SIGNED_MAIL, headers, now)).toEqual(id);
    const tampered: Array<[string, Record<string, string>]> = [
      ['upstream token changed', { ...headers, 'x-platform-upstream-token': 'another-users-token' }],
      ['actor changed', { ...headers, 'x-platform-actor': 'agent-8' }],
    ];
    const { 'x-platform-upstream-token': _t, ...noToken } = headers;
    const { 'x-platform-actor': _a, ...noActor } = headers;
    tampered.push(['upstream token removed', noToken], ['actor removed', noActor]);
    const onlyToken = signIdentity(key, SIGNED_MAIL, { ...id, actor: '' }, now);
    tampered.push(['actor added', { ...onlyToken, 'x-platform-actor': 'agent-7' }]);
    for (const [what, h] of tampered) {
      expect(() => verifyIdentity(key, SIGNED_MAIL, h, now), what).toThrow(/signature invalid/);
    }
  });

  it('signs the same with the upstream token hashed beforehand, and the flat list carries the same headers', () => {
    const now = Math.floor(Date.now() / 1000);
    const id = { ...ID, entitlements: '', upstreamToken: 'user-upstream-token', actor: '' };
    const headers = signIdentity(key, SIGNED_MAIL, id, now);
    const hashed = { ...id, upstreamTokenSha256: identityValueSha256('user-upstream-token') };
    expect(identityValueSha256('user-upstream-token')).toBe(
      createHash('sha256').update('user-upstream-token').digest('hex'),
    );
    const flat = pushIdentityHeaders(['content-type', 'application/json'], key, SIGNED_MAIL, hashed, now);
    expect(flat.slice(0, 2)).toEqual(['content-type', 'application/json']);
    expect(
      Object.fromEntries(
        Array.from({ length: flat.length / 2 - 1 }, (_, i) => flat.slice(2 + 2 * i, 4 + 2 * i)),
      ),
    ).toEqual(headers);
    // The precomputed hash is what gets signed: another token's hash makes a signature no verifier accepts.
    const wrong = signIdentity(
      key,
      SIGNED_MAIL,
      { ...id, upstreamTokenSha256: identityValueSha256('other') },
      now,
    );
    expect(() => verifyIdentity(key, SIGNED_MAIL, wrong, now)).toThrow(/signature invalid/);
  });

  it('under v2 and v3 the two headers are unsigned and therefore ignored', () => {
    const now = Math.floor(Date.now() / 1000);
    const extra = { 'x-platform-upstream-token': 'planted', 'x-platform-actor': 'planted' };
    for (const id of [ID, { ...ID, entitlements: '' }]) {
      const got = verifyIdentity(
        key,
        SIGNED_MAIL,
        { ...signIdentity(key, SIGNED_MAIL, id, now), ...extra },
        now,
      );
      expect(got.upstreamToken).toBeUndefined();
      expect(got.actor).toBeUndefined();
    }
  });
});

describe('the HMAC key', () => {
  it("is one KeyObject per identity key, made once, holding the key string's UTF-8 bytes", () => {
    const key = deriveIdentityKey(SECRET, 'deals');
    const k = hmacKey(key);
    expect(k).toBeInstanceOf(KeyObject);
    expect(hmacKey(key)).toBe(k);
    expect(hmacKey(deriveIdentityKey(SECRET, 'mail'))).not.toBe(k);
    expect(createHmac('sha256', k).update('x').digest('hex')).toBe(
      createHmac('sha256', key).update('x').digest('hex'),
    );
  });
});
