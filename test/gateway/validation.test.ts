// Bearer validation and the refusal paths of `platform gateway`, end to end: a real `platform idp` (platform
// tokens, revocation through /oauth/revoke), a stand-in Entra key server, HS256 service tokens, a tiny
// upstream that records what reaches it, and the gateway as a real process on the shared Redis.
import { createPrivateKey, createPublicKey, randomUUID, sign } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { jwksKey, RedisRevocationPublisher } from '../../lib/revocation.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { postForm, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess, testSigningKeyPem } from '../helpers/processes.ts';
import {
  b64,
  call,
  type EntraTenant,
  errorOf,
  type GatewayProcess,
  gatewayEnv,
  type KeyServer,
  mint,
  mintHs256,
  newSigningKey,
  type SigningKey,
  startEntra,
  startGatewayProcess,
  startKeyServer,
  startUpstream,
  type Upstream,
  verifyRecorded,
} from './helpers.ts';

const BASE = 'https://mcp.example.test';
const TENANT = randomUUID();
const MAIL_CLIENT_ID = randomUUID();
const MAIL_SECRET = 'mail-shared-secret-0123456789abcdef-0123';
const MAIL_APP_ID_URI = `${BASE}/mail/mcp`;
const V2_ISS = `https://login.microsoftonline.com/${TENANT}/v2.0`;
const V1_ISS = `https://sts.windows.net/${TENANT}/`;
const MAIL_METADATA = `${BASE}/mail/.well-known/oauth-protected-resource`;

let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;
let entra: EntraTenant;
let attacker: KeyServer;
let upstream: Upstream;
let gw: GatewayProcess;
let redis: Redis;
/** The IdP's own signing key (the test helper's PEM), so hostile variants of platform tokens can be signed. */
let idpKey: SigningKey;
let entraKey: SigningKey;

beforeAll(async () => {
  db = await createTestDatabase();
  redis = new Redis(inject('redisUrl'));
  [idp, entra, attacker, upstream] = await Promise.all([
    startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl') }),
    startEntra(TENANT, MAIL_CLIENT_ID),
    startKeyServer(),
    startUpstream(),
  ]);
  user = await seedUser(db.pool);
  const jwks = (await (await fetch(`${idp.url}/.well-known/jwks.json`)).json()) as {
    keys: Array<{ kid: string }>;
  };
  idpKey = { kid: jwks.keys[0]!.kid, privateKey: createPrivateKey(testSigningKeyPem()), publicJwk: {} };
  entraKey = entra.keys[0]!;
  // Another run may have left a key set under the same issuer URL; this file counts on a clean start.
  await redis.del(jwksKey(idp.issuer), jwksKey(V2_ISS), jwksKey(V1_ISS));
  gw = await startGatewayProcess(
    gatewayEnv(
      {
        base: BASE,
        services: {
          mail: upstream.url,
          deals: upstream.url,
          // Nothing listens on port 9 (discard): every request to this service meets a refused connection.
          down: 'http://127.0.0.1:9',
        },
        // An IdP, not a key server: PLATFORM_JWKS_URL unset, the gateway finds the key set through discovery.
        platform: idp,
        entra,
        redisUrl: inject('redisUrl'),
      },
      {
        MAIL_MCP_SHARED_SECRET: MAIL_SECRET,
        MAIL_MCP_ALLOWED_ORIGINS: `${BASE},https://claude.ai`,
        GATEWAY_UPSTREAM_RETRY_SECONDS: '0.3',
      },
    ),
  );
});

afterAll(async () => {
  await gw?.stop();
  await idp?.stop();
  await Promise.all([entra?.close(), attacker?.close(), upstream?.close()]);
  await redis?.quit();
  await db?.drop();
});

const mail = (path = '/mail/mcp') => `${gw.url}${path}`;

function platformClaims(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    iss: idp.issuer,
    aud: idp.audience,
    sub: `sub-${randomUUID()}`,
    email: 'person@example.com',
    scope: 'openid email mcp:mail',
    client_id: 'platform-cli',
    ...extra,
  };
}

function entraClaims(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    iss: V2_ISS,
    aud: MAIL_CLIENT_ID,
    sub: `entra-${randomUUID()}`,
    preferred_username: 'someone@contoso.example',
    scp: 'mcp.access',
    azp: randomUUID(),
    uti: `uti-${randomUUID()}`,
    tid: TENANT,
    ver: '2.0',
    jti: null,
    ...extra,
  };
}

/** A JWS over arbitrary header and payload text, RS256-signed with `key` (for claims jose would refuse). */
function signRaw(header: object, payloadJson: string, key: SigningKey): string {
  const input = `${b64(header)}.${b64(payloadJson)}`;
  return `${input}.${sign('sha256', Buffer.from(input), key.privateKey).toString('base64url')}`;
}

describe('public routes', () => {
  it('answers /health itself and proxies /<service>/health without a bearer', async () => {
    const h = await call(`${gw.url}/health`);
    expect(h.status).toBe(200);
    expect(h.json).toEqual({ status: 'ok' });
    const sh = await call(mail('/mail/health'));
    expect(sh.status).toBe(200);
    expect(upstream.requests.at(-1)!.url).toBe('/mail/health');
    expect(upstream.requests.at(-1)!.headers['x-platform-identity']).toBeUndefined();
  });

  it('serves RFC 9728 metadata at the contract path and the path-inserted one', async () => {
    const m = await call(mail('/mail/.well-known/oauth-protected-resource'));
    expect(m.status).toBe(200);
    expect(m.json).toEqual({
      resource: MAIL_APP_ID_URI,
      authorization_servers: [idp.issuer, V2_ISS],
      scopes_supported: ['mcp:mail', `${MAIL_APP_ID_URI}/mcp.access`],
      bearer_methods_supported: ['header'],
    });
    const inserted = await call(`${gw.url}/.well-known/oauth-protected-resource/mail/mcp`);
    expect(inserted.json).toEqual(m.json);
    // deals has no Entra client id: Entra is neither advertised nor accepted there.
    const d = await call(`${gw.url}/deals/.well-known/oauth-protected-resource`);
    expect(d.json.authorization_servers).toEqual([idp.issuer]);
    expect(d.json.scopes_supported).toEqual(['mcp:deals']);
  });

  it('sends only the headers it means to (no framework extras such as vary or x-powered-by)', async () => {
    const m = await call(mail('/mail/.well-known/oauth-protected-resource'));
    const names = Object.keys(m.headers).sort();
    // CORS on the metadata route (browser clients such as the MCP Inspector read it), nothing else added.
    expect(names).toEqual([
      'access-control-allow-origin',
      'connection',
      'content-length',
      'content-type',
      'date',
      'x-request-id',
    ]);
  });

  it('answers 404 with the error body for a path of no service', async () => {
    const r = await call(`${gw.url}/nothing/mcp`, { method: 'POST' });
    expect(r.status).toBe(404);
    expect(errorOf(r).code).toBe('NOT_FOUND');
  });
});

describe('platform tokens from a running platform idp', () => {
  it('proxies with signed identity headers; Authorization, cookies and forged x-platform-* never reach the upstream', async () => {
    const t = await signIn(idp.issuer, user.sessionToken, { scope: 'openid email mcp:mail' });
    const r = await call(mail(), {
      method: 'POST',
      token: t.access_token,
      headers: {
        'x-platform-user-email': 'ceo@example.com',
        'X-Platform-Issuer': 'entra',
        'x-platform-identity': 't=1,v1=00',
        'x-platform-anything': 'x',
        cookie: 'authjs.session-token=secret',
        'x-request-id': 'client-req-42',
        'mcp-session-id': 'sess-abc',
      },
    });
    expect(r.status).toBe(200);
    expect(r.headers['x-request-id']).toBe('client-req-42');
    const seen = upstream.requests.at(-1)!;
    expect(seen.url).toBe('/mail/mcp');
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers.cookie).toBeUndefined();
    expect(seen.headers['x-platform-anything']).toBeUndefined();
    expect(seen.headers['mcp-session-id']).toBe('sess-abc');
    // Exactly one of each identity header: the forged ones were dropped, not merged.
    const platformHeaders = seen.rawHeaders.filter(
      (_, i) => i % 2 === 0 && /^x-platform-/i.test(seen.rawHeaders[i]!),
    );
    expect(platformHeaders.sort()).toEqual(
      [
        'x-platform-client-id',
        'x-platform-identity',
        'x-platform-issuer',
        'x-platform-jti',
        'x-platform-scope',
        'x-platform-user-email',
        'x-platform-user-sub',
      ].sort(),
    );
    const id = verifyRecorded(seen);
    const claims = JSON.parse(Buffer.from(t.access_token.split('.')[1]!, 'base64url').toString()) as Record<
      string,
      string
    >;
    expect(id).toEqual({
      email: user.email,
      sub: user.sub,
      issuer: 'platform',
      scope: 'openid email mcp:mail',
      clientId: 'platform-cli',
      jti: claims.jti,
      requestId: 'client-req-42',
      // Signature v3: the token has no `ent`, so the signed entitlements line is the empty header's.
      entitlements: '',
    });
  });

  it('a token without mcp:<service> gets 403 INSUFFICIENT_SCOPE naming the scope', async () => {
    const t = await signIn(idp.issuer, user.sessionToken, { scope: 'openid mcp:platform' });
    const r = await call(mail(), { method: 'POST', token: t.access_token });
    expect(r.status).toBe(403);
    expect(errorOf(r)).toMatchObject({ code: 'INSUFFICIENT_SCOPE', reason: 'insufficient_scope' });
    expect(r.headers['www-authenticate']).toBe(
      `Bearer resource_metadata="${MAIL_METADATA}", error="insufficient_scope", scope="mcp:mail"`,
    );
  });

  it('a token revoked at the IdP (POST /oauth/revoke) is refused with token_revoked', async () => {
    const t = await signIn(idp.issuer, user.sessionToken, { scope: 'mcp:mail' });
    expect((await call(mail(), { method: 'POST', token: t.access_token })).status).toBe(200);
    const revoke = await postForm(`${idp.issuer}/oauth/revoke`, {
      token: t.access_token,
      client_id: 'platform-cli',
    });
    expect(revoke.status).toBe(200);
    // The IdP publishes on platform:revocations; give the channel a moment (the propagation bound itself is
    // measured in revocation.test.ts).
    let r = await call(mail(), { method: 'POST', token: t.access_token });
    for (let i = 0; i < 20 && r.status === 200; i++) {
      await new Promise((res) => setTimeout(res, 25));
      r = await call(mail(), { method: 'POST', token: t.access_token });
    }
    expect(r.status).toBe(401);
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'token_revoked' });
  });

  it('accepts an expiry within the 60 s leeway and refuses one beyond it', async () => {
    const within = await mint({ key: idpKey, claims: platformClaims(), iat: -3600, exp: -30 });
    expect((await call(mail(), { method: 'POST', token: within })).status).toBe(200);
    const beyond = await mint({ key: idpKey, claims: platformClaims(), iat: -3600, exp: -90 });
    const r = await call(mail(), { method: 'POST', token: beyond });
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'token_expired' });
  });
});

describe('Entra ID tokens (stand-in key server)', () => {
  it('accepts a v2 token (aud = client id) and takes email from preferred_username, trimmed and lowercased', async () => {
    const claims = entraClaims({ preferred_username: '  Someone@Contoso.EXAMPLE ' });
    const t = await mint({ key: entraKey, claims, header: { typ: 'JWT' } });
    const r = await call(mail(), { method: 'POST', token: t });
    expect(r.status).toBe(200);
    const id = verifyRecorded(upstream.requests.at(-1)!);
    expect(id).toMatchObject({
      email: 'someone@contoso.example',
      issuer: 'entra',
      scope: 'mcp.access',
      jti: claims.uti,
    });
    expect(id.clientId).toBe(claims.azp);
  });

  it('accepts a v1 token (sts.windows.net issuer, aud = app id URI, upn, appid)', async () => {
    const appid = randomUUID();
    const t = await mint({
      key: entraKey,
      claims: entraClaims({
        iss: V1_ISS,
        aud: MAIL_APP_ID_URI,
        preferred_username: null,
        upn: 'V1@Contoso.example',
        appid,
        azp: null,
        ver: '1.0',
      }),
    });
    const r = await call(mail(), { method: 'POST', token: t });
    expect(r.status).toBe(200);
    expect(verifyRecorded(upstream.requests.at(-1)!)).toMatchObject({
      email: 'v1@contoso.example',
      clientId: appid,
    });
  });

  it('refuses a token without mcp.access in scp with 403', async () => {
    const t = await mint({ key: entraKey, claims: entraClaims({ scp: 'User.Read' }) });
    const r = await call(mail(), { method: 'POST', token: t });
    expect(r.status).toBe(403);
    expect(errorOf(r).code).toBe('INSUFFICIENT_SCOPE');
    expect(r.headers['www-authenticate']).toContain(`scope="${MAIL_APP_ID_URI}/mcp.access"`);
  });

  it("a user's cut-off (revoke-user) revokes their Entra tokens by object id, Entra's sub being pairwise", async () => {
    const oid = randomUUID();
    const now = Math.floor(Date.now() / 1000);
    const before = await mint({ key: entraKey, claims: entraClaims({ oid }), iat: -10 });
    const otherUser = await mint({ key: entraKey, claims: entraClaims({ oid: randomUUID() }), iat: -10 });
    expect((await call(mail(), { method: 'POST', token: before })).status).toBe(200);
    await new RedisRevocationPublisher(redis).denySubject(oid, now);
    await expect
      .poll(async () => errorOf(await call(mail(), { method: 'POST', token: before })).reason)
      .toBe('token_revoked');
    expect((await call(mail(), { method: 'POST', token: otherUser })).status).toBe(200);
    // Signed in again after the cut-off: accepted.
    const after = await mint({ key: entraKey, claims: entraClaims({ oid, iat: now + 1 }) });
    expect((await call(mail(), { method: 'POST', token: after })).status).toBe(200);
  });

  it('refuses Entra tokens at a service without an Entra client id', async () => {
    const t = await mint({ key: entraKey, claims: entraClaims({ aud: `${BASE}/deals/mcp` }) });
    const r = await call(`${gw.url}/deals/mcp`, { method: 'POST', token: t });
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'unknown_issuer' });
  });
});

describe("a service's own HS256 tokens", () => {
  it('are accepted with iss = the service and aud = its app id URI', async () => {
    const t = await mintHs256(MAIL_SECRET, {
      iss: 'mail',
      aud: MAIL_APP_ID_URI,
      sub: 'svc-user',
      email: 'Svc@Example.com',
    });
    const r = await call(mail(), { method: 'POST', token: t });
    expect(r.status).toBe(200);
    expect(verifyRecorded(upstream.requests.at(-1)!)).toMatchObject({
      issuer: 'service',
      email: 'svc@example.com',
    });
  });

  it('are not accepted by another service', async () => {
    const t = await mintHs256(MAIL_SECRET, {
      iss: 'mail',
      aud: `${BASE}/deals/mcp`,
      sub: 'svc-user',
      email: 'svc@example.com',
    });
    const r = await call(`${gw.url}/deals/mcp`, { method: 'POST', token: t });
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'unknown_issuer' });
  });
});

describe('401 responses', () => {
  it('no bearer: MISSING_TOKEN and a challenge with resource_metadata only', async () => {
    const r = await call(mail(), { method: 'POST' });
    expect(r.status).toBe(401);
    const e = errorOf(r);
    expect(e).toMatchObject({ code: 'MISSING_TOKEN', reason: 'missing_token' });
    expect(e.requestId).toBe(r.headers['x-request-id']);
    // Two challenges (RFC 9449 §7.1), joined by Node's client into one value.
    expect(r.headers['www-authenticate']).toBe(
      `Bearer resource_metadata="${MAIL_METADATA}", DPoP algs="ES256 ES384 EdDSA Ed25519 PS256 RS256"`,
    );
    expect(Object.keys(r.json.error).sort()).toEqual(['code', 'context', 'message']);
    expect(Object.keys(r.json.error.context).sort()).toEqual(['reason', 'request_id']);
  });

  it('a bad bearer: INVALID_TOKEN, the reason in body and log, error="invalid_token" in the challenge', async () => {
    const r = await call(mail(), {
      method: 'POST',
      token: 'not-a-token',
      headers: { 'x-request-id': 'bad-bearer-1' },
    });
    expect(r.status).toBe(401);
    expect(errorOf(r)).toMatchObject({
      code: 'INVALID_TOKEN',
      reason: 'malformed_token',
      requestId: 'bad-bearer-1',
    });
    expect(r.headers['www-authenticate']).toMatch(
      new RegExp(
        `^Bearer resource_metadata="${MAIL_METADATA}", error="invalid_token", error_description="[^"]+", DPoP algs="[^"]+"$`,
      ),
    );
    await expect
      .poll(() => gw.logs().find((l) => l.reqId === 'bad-bearer-1'))
      .toMatchObject({ level: 40, path: '/mail/mcp', reason: 'malformed_token' });
    // One `service` key per line (JSON.parse would hide a second one): the MCP service; `name` is the process.
    const line = gw
      .output()
      .split('\n')
      .find((l) => l.includes('"reqId":"bad-bearer-1"'))!;
    expect(line.match(/"service":/g)).toHaveLength(1);
    expect(JSON.parse(line)).toMatchObject({ name: 'gateway', service: 'mail' });
  });

  it('audience mismatch says "Audience doesn\'t match"', async () => {
    const t = await mint({ key: idpKey, claims: platformClaims({ aud: 'https://other.example/api' }) });
    const r = await call(mail(), { method: 'POST', token: t });
    expect(errorOf(r).code).toBe('INVALID_TOKEN');
    expect(errorOf(r).reason).toBe('invalid_audience');
    expect(errorOf(r).message).toContain("Audience doesn't match");
  });

  it('an unknown kid is refused with unknown_kid', async () => {
    const stranger = await newSigningKey();
    const t = await mint({ key: stranger, claims: platformClaims() });
    const r = await call(mail(), { method: 'POST', token: t });
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'unknown_kid' });
  });
});

describe('guards', () => {
  it('421 for a Host the service does not answer for, before any token check', async () => {
    const r = await call(mail(), { method: 'POST', headers: { host: 'evil.example:8080' } });
    expect(r.status).toBe(421);
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_HOST', message: 'Invalid Host header' });
    for (const host of ['localhost:1234', 'mcp.example.test', '127.0.0.1']) {
      expect((await call(mail(), { method: 'POST', headers: { host } })).status).toBe(401);
    }
  });

  it('403 for an Origin that is not allowed; allowed origins and no Origin pass', async () => {
    const r = await call(mail(), { method: 'POST', headers: { origin: 'https://evil.example' } });
    expect(r.status).toBe(403);
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_ORIGIN', reason: 'origin_not_allowed' });
    expect((await call(mail(), { method: 'POST', headers: { origin: 'https://claude.ai' } })).status).toBe(
      401,
    );
    expect((await call(mail(), { method: 'POST', headers: { origin: BASE } })).status).toBe(401);
  });

  it('400 for dot segments or encoded separators that could reach another prefix', async () => {
    for (const p of ['/mail/../deals/mcp', '/mail/%2e%2e/deals/mcp', '/mail/x%2Fy']) {
      const r = await call(`${gw.url}${p}`, { method: 'POST' });
      expect(r.status, p).toBe(400);
    }
  });

  it('503 UPSTREAM_UNAVAILABLE (never a bare 502) when the tool server does not answer', async () => {
    const t = await mint({ key: idpKey, claims: platformClaims({ scope: 'mcp:down' }) });
    const r = await call(`${gw.url}/down/mcp`, { method: 'POST', token: t });
    expect(r.status).toBe(503);
    expect(errorOf(r)).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', reason: 'upstream_unreachable' });
    const h = await call(`${gw.url}/down/health`);
    expect(h.status).toBe(503);
  });
});

describe('malformed and hostile tokens and headers: refused, never a 5xx', () => {
  interface Case {
    name: string;
    authorization: () => Promise<string> | string;
    status?: number;
    code?: string;
    reason?: string;
  }
  const invalid = (reason: string) => ({ status: 401, code: 'INVALID_TOKEN', reason });
  const now = () => Math.floor(Date.now() / 1000);
  const bearer = async (t: Promise<string> | string) => `Bearer ${await t}`;
  const platformToken = (
    claims: Record<string, unknown> = {},
    header: Record<string, unknown> = {},
    key?: SigningKey,
  ) => mint({ key: key ?? idpKey, claims: platformClaims(claims), header });

  const cases: Case[] = [
    {
      name: 'scheme without token',
      authorization: () => 'Bearer',
      status: 401,
      code: 'MISSING_TOKEN',
      reason: 'not_bearer',
    },
    {
      name: 'Basic credentials',
      authorization: () => 'Basic dXNlcjpwYXNz',
      status: 401,
      code: 'MISSING_TOKEN',
    },
    { name: 'one opaque word', authorization: () => 'Bearer abc', ...invalid('malformed_token') },
    { name: 'two segments', authorization: () => 'Bearer a.b', ...invalid('malformed_token') },
    {
      name: 'five segments (JWE shape)',
      authorization: () => 'Bearer a.b.c.d.e',
      ...invalid('malformed_token'),
    },
    {
      name: 'token with a space',
      authorization: async () => `${await bearer(platformToken())} extra`,
      ...invalid('malformed_token'),
    },
    {
      name: 'header not JSON',
      authorization: () => `Bearer ${b64('nope')}.${b64({ iss: 'x' })}.c2ln`,
      ...invalid('malformed_token'),
    },
    {
      name: 'header a JSON array',
      authorization: () => `Bearer ${b64([1])}.${b64({ iss: 'x' })}.c2ln`,
      ...invalid('malformed_token'),
    },
    {
      name: 'payload a JSON string',
      authorization: () => `Bearer ${b64({ alg: 'RS256' })}.${b64('"x"')}.c2ln`,
      ...invalid('malformed_token'),
    },
    {
      name: 'alg none with an empty signature',
      authorization: () =>
        `Bearer ${b64({ alg: 'none' })}.${b64(platformClaims({ iat: now(), exp: now() + 600 }))}.`,
      ...invalid('malformed_token'),
    },
    {
      name: 'alg none with a signature',
      authorization: () =>
        `Bearer ${b64({ alg: 'none' })}.${b64(platformClaims({ iat: now(), exp: now() + 600 }))}.AAAA`,
      ...invalid('unsupported_alg'),
    },
    {
      name: 'HS256 keyed with the issuer public key (RS/HS confusion)',
      authorization: async () => {
        const pem = createPublicKey(idpKey.privateKey).export({ type: 'spki', format: 'pem' }) as string;
        return bearer(mintHs256(pem, platformClaims(), { kid: idpKey.kid }));
      },
      ...invalid('unsupported_alg'),
    },
    {
      name: 'RS512 under the platform issuer',
      authorization: () => {
        const input = `${b64({ alg: 'RS512', kid: idpKey.kid })}.${b64(platformClaims({ iat: now(), exp: now() + 600 }))}`;
        return `Bearer ${input}.${sign('sha512', Buffer.from(input), idpKey.privateKey).toString('base64url')}`;
      },
      ...invalid('unsupported_alg'),
    },
    {
      name: 'RS256 on the HS256 service path',
      authorization: () =>
        bearer(
          mint({ key: idpKey, claims: { iss: 'mail', aud: MAIL_APP_ID_URI, sub: 's', email: 'a@b.c' } }),
        ),
      ...invalid('unsupported_alg'),
    },
    {
      name: 'jku pointing at an attacker key set',
      authorization: () => bearer(platformToken({}, { jku: attacker.jwksUrl }, attacker.keys[0])),
      ...invalid('unknown_kid'),
    },
    {
      name: 'embedded jwk of the attacker',
      authorization: () => bearer(platformToken({}, { jwk: attacker.keys[0]!.publicJwk }, attacker.keys[0])),
      ...invalid('unknown_kid'),
    },
    {
      name: 'x5u pointing at the attacker',
      authorization: () => bearer(platformToken({}, { x5u: `${attacker.url}/cert.pem` }, attacker.keys[0])),
      ...invalid('unknown_kid'),
    },
    {
      name: "the issuer's kid, signed by another key",
      authorization: () => bearer(platformToken({}, { kid: idpKey.kid }, attacker.keys[0])),
      ...invalid('invalid_signature'),
    },
    {
      name: 'crit header',
      authorization: () =>
        bearer(
          signRaw(
            { alg: 'RS256', kid: idpKey.kid, crit: ['exp'] },
            JSON.stringify(platformClaims({ iat: now(), exp: now() + 600 })),
            idpKey,
          ),
        ),
      ...invalid('unsupported_crit'),
    },
    {
      name: 'kid path traversal',
      authorization: () => bearer(platformToken({}, { kid: '../../../../etc/passwd' })),
      ...invalid('unknown_kid'),
    },
    {
      name: 'kid a number',
      authorization: () =>
        bearer(
          signRaw(
            { alg: 'RS256', kid: 7 },
            JSON.stringify(platformClaims({ iat: now(), exp: now() + 60 })),
            idpKey,
          ),
        ),
      ...invalid('invalid_kid'),
    },
    {
      name: 'kid 5000 characters',
      authorization: () => bearer(platformToken({}, { kid: 'k'.repeat(5000) })),
      ...invalid('invalid_kid'),
    },
    {
      name: 'no exp',
      authorization: () => bearer(platformToken({ exp: null })),
      ...invalid('missing_claim'),
    },
    {
      name: 'exp a string',
      authorization: () => bearer(platformToken({ exp: String(now() + 600) })),
      ...invalid('invalid_claim'),
    },
    {
      name: 'exp 1e400 (JSON Infinity)',
      authorization: () =>
        bearer(
          signRaw(
            { alg: 'RS256', kid: idpKey.kid },
            JSON.stringify(platformClaims({ iat: now() })).replace(/}$/, ',"exp":1e400}'),
            idpKey,
          ),
        ),
      ...invalid('invalid_claim'),
    },
    {
      name: 'expired beyond the leeway',
      authorization: () => bearer(platformToken({ iat: now() - 7200, exp: now() - 3600 })),
      ...invalid('token_expired'),
    },
    {
      name: 'nbf in the future',
      authorization: () => bearer(platformToken({ nbf: now() + 600 })),
      ...invalid('token_not_yet_valid'),
    },
    {
      name: 'iat in the future',
      authorization: () => bearer(platformToken({ iat: now() + 600, exp: now() + 4200 })),
      ...invalid('token_issued_in_future'),
    },
    {
      name: 'no iat',
      authorization: () => bearer(platformToken({ iat: null })),
      ...invalid('missing_claim'),
    },
    {
      name: 'no sub',
      authorization: () => bearer(platformToken({ sub: null })),
      ...invalid('missing_claim'),
    },
    {
      name: 'no aud',
      authorization: () => bearer(platformToken({ aud: null })),
      ...invalid('missing_claim'),
    },
    {
      name: 'aud an empty array',
      authorization: () => bearer(platformToken({ aud: [] })),
      ...invalid('invalid_claim'),
    },
    {
      name: 'unknown issuer',
      authorization: () => bearer(platformToken({ iss: 'https://evil.example' })),
      ...invalid('unknown_issuer'),
    },
    {
      name: 'iss an array',
      authorization: () => bearer(platformToken({ iss: [idp.issuer] })),
      ...invalid('missing_claim'),
    },
    {
      name: 'issuer with a trailing slash',
      authorization: () => bearer(platformToken({ iss: `${idp.issuer}/` })),
      ...invalid('unknown_issuer'),
    },
    {
      name: 'signature truncated',
      authorization: async () => (await bearer(platformToken())).slice(0, -12),
      ...invalid('invalid_signature'),
    },
    {
      name: 'payload swapped under another signature',
      authorization: async () => {
        const [h, , s] = (await platformToken()).split('.');
        const [, p] = (await platformToken({ email: 'ceo@example.com' })).split('.');
        return `Bearer ${h}.${p}.${s}`;
      },
      ...invalid('invalid_signature'),
    },
    {
      name: 'email smuggling a header line',
      authorization: () =>
        bearer(platformToken({ email: 'a@b.c\r\nx-platform-user-email: ceo@example.com' })),
      ...invalid('malformed_claim'),
    },
    {
      name: 'sub with a newline',
      authorization: () => bearer(platformToken({ sub: 'a\nb' })),
      ...invalid('malformed_claim'),
    },
    {
      name: 'no email of any kind',
      authorization: () => bearer(platformToken({ email: null })),
      ...invalid('missing_email'),
    },
    {
      name: 'Entra token with a header nonce (Graph token)',
      authorization: () => bearer(mint({ key: entraKey, claims: entraClaims(), header: { nonce: 'abc' } })),
      ...invalid('unsupported_token'),
    },
    {
      name: "another tenant's Entra issuer",
      authorization: () =>
        bearer(
          mint({
            key: entraKey,
            claims: entraClaims({ iss: `https://login.microsoftonline.com/${randomUUID()}/v2.0` }),
          }),
        ),
      ...invalid('unknown_issuer'),
    },
    {
      name: 'Entra token for another audience',
      authorization: () =>
        bearer(mint({ key: entraKey, claims: entraClaims({ aud: 'https://graph.microsoft.com' }) })),
      ...invalid('invalid_audience'),
    },
    {
      name: 'HS256 service token with the wrong secret',
      authorization: () =>
        bearer(mintHs256('x'.repeat(40), { iss: 'mail', aud: MAIL_APP_ID_URI, sub: 's', email: 'a@b.c' })),
      ...invalid('invalid_signature'),
    },
    {
      name: 'prototype-pollution keys in the payload (otherwise valid)',
      authorization: () =>
        bearer(
          signRaw(
            { alg: 'RS256', kid: idpKey.kid },
            JSON.stringify(platformClaims({ iat: now(), exp: now() + 600 })).replace(
              /}$/,
              ',"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}',
            ),
            idpKey,
          ),
        ),
      status: 200,
    },
  ];

  it('has at least 25 cases', () => {
    expect(cases.length).toBeGreaterThanOrEqual(25);
  });

  it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const r = await call(mail(), { method: 'POST', headers: { authorization: await c.authorization() } });
    expect(r.status).toBeLessThan(500);
    if (c.status !== undefined) expect(r.status).toBe(c.status);
    if (c.code !== undefined) expect(errorOf(r).code).toBe(c.code);
    if (c.reason !== undefined) expect(errorOf(r).reason).toBe(c.reason);
  });

  it('the attacker key server named in jku/x5u was never contacted', () => {
    expect(attacker.fetches()).toBe(0);
  });

  it('an oversized Authorization header is a 431, not a 5xx', async () => {
    const r = await call(mail(), {
      method: 'POST',
      headers: { authorization: `Bearer ${'a'.repeat(40_000)}` },
    }).catch(() => ({ status: 431 }));
    expect(r.status).toBe(431);
  });

  it('the gateway is still healthy afterwards and logged no error', async () => {
    expect((await call(`${gw.url}/health`)).status).toBe(200);
    expect(gw.logs().filter((l) => (l.level as number) >= 50)).toEqual([]);
  });
});
