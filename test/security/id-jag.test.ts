// Attack surface of enterprise-managed authorization (MCP's ID-JAG profile): the token endpoint accepts a grant
// signed by an enterprise IdP and issues a platform token for a user without the consent page. Real IdP, gateway
// and tool servers; a stand-in enterprise IdP (its key set over HTTP, a token exchange and a signer). The SDK v2
// CrossAppAccessProvider obtains a token through the stand-in's token exchange and calls whoami through the
// gateway; grants that are untrusted, misdirected, replayed, another client's, expired, for an unentitled or
// blocked user, for scopes beyond the grant, of the wrong type or resource are refused with the documented error.
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client,
  CrossAppAccessProvider,
  requestJwtAuthorizationGrant,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callAdminApi } from '../helpers/admin-api.ts';
import { type ReplayStack, startReplayStack } from '../helpers/client-replay.ts';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { type EnterpriseIdp, startEnterpriseIdp } from '../helpers/enterprise-idp.ts';
import { gatewayStatus, newMachineKey } from '../helpers/machine-clients.ts';
import { postForm, signIn } from '../helpers/oauth.ts';
import { toolJson } from '../tools/helpers.ts';

const GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ADMIN = `ej-admin-${crypto.randomUUID().slice(0, 8)}@example.com`;

let r: ReplayStack;
let ent: EnterpriseIdp;
/** Trusted, but its grants may be redeemed only by a client id nobody has. */
let restricted: EnterpriseIdp;
/** Not in the trusted issuers file. */
let rogue: EnterpriseIdp;
/** Trusted for the users of corp.example only (email_domains). */
let corp: EnterpriseIdp;
/** Trusted for any domain, but the grant's sub must be the user's `okta` account (subject_provider). */
let okta: EnterpriseIdp;
let adminToken: string;
let alice: SeededUser;
let client: { id: string; secret: string };
let other: { id: string; secret: string };
const issuersFile = join(tmpdir(), `trusted-issuers-idjag-${crypto.randomUUID()}.yaml`);

const adminApi = (method: string, path: string, body?: unknown) =>
  callAdminApi(r.issuer, adminToken, method, path, body);

async function confidentialClient(name: string): Promise<{ id: string; secret: string }> {
  const reg = await r.register({
    client_name: name,
    redirect_uris: ['http://127.0.0.1/callback'],
    token_endpoint_auth_method: 'client_secret_basic',
    grant_types: ['authorization_code', 'refresh_token', GRANT],
  });
  expect(reg.status, reg.text).toBe(201);
  return { id: String(reg.json.client_id), secret: String(reg.json.client_secret) };
}

/** A user of the platform entitled to `platform` (PLATFORM_ENTITLEMENTS=managed). */
async function entitledUser(): Promise<SeededUser> {
  const u = await seedUser(r.stack.db.pool);
  expect(
    (await adminApi('POST', '/admin/api/entitlements', { service: 'platform', email: u.email })).status,
  ).toBe(200);
  return u;
}

const basic = (c: { id: string; secret: string }) => ({
  authorization: `Basic ${Buffer.from(`${encodeURIComponent(c.id)}:${encodeURIComponent(c.secret)}`).toString('base64')}`,
});

/** POST /oauth/token grant_type=jwt-bearer with the assertion, authenticated as `as` (HTTP Basic). */
const redeem = (assertion: string, as = client, form: Record<string, string> = {}) =>
  postForm(`${r.issuer}/oauth/token`, { grant_type: GRANT, assertion, ...form }, basic(as));

/** A grant from the trusted stand-in for `email`, to our client, for the platform service. */
const grantFor = (email: string, extra: Partial<Parameters<EnterpriseIdp['sign']>[0]> = {}) =>
  ent.sign({
    email,
    aud: r.issuer,
    client_id: client.id,
    resource: r.serverUrl('platform'),
    scope: 'mcp:platform',
    ...extra,
  });

beforeAll(async () => {
  [ent, restricted, rogue, corp, okta] = await Promise.all([
    startEnterpriseIdp(),
    startEnterpriseIdp(),
    startEnterpriseIdp(),
    startEnterpriseIdp(),
    startEnterpriseIdp(),
  ]);
  await writeFile(
    issuersFile,
    `issuers:
  - issuer: ${ent.issuer}
    jwks_uri: ${ent.jwksUri}
    kind: id-jag
  - issuer: ${restricted.issuer}
    jwks_uri: ${restricted.jwksUri}
    kind: id-jag
    clients: [a-client-nobody-has]
  - issuer: ${corp.issuer}
    jwks_uri: ${corp.jwksUri}
    kind: id-jag
    email_domains: [Corp.Example]
  - issuer: ${okta.issuer}
    jwks_uri: ${okta.jwksUri}
    kind: id-jag
    email_domains: ["*"]
    subject_provider: okta
`,
  );
  r = await startReplayStack({
    idpEnv: {
      PLATFORM_ADMIN_EMAILS: ADMIN,
      PLATFORM_TRUSTED_ISSUERS_FILE: issuersFile,
      PLATFORM_ENTITLEMENTS: 'managed',
    },
  });
  const admin = await seedUser(r.stack.db.pool, { email: ADMIN });
  adminToken = (await signIn(r.issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
  alice = await entitledUser();
  client = await confidentialClient('Enterprise assistant');
  other = await confidentialClient('Another assistant');
}, 90_000);

afterAll(async () => {
  await r?.stop();
  await Promise.all([ent, restricted, rogue, corp, okta].map((i) => i?.close()));
});

describe('enterprise-managed authorization (ID-JAG)', () => {
  it('discovery lists the jwt-bearer grant and the id-jag grant profile', async () => {
    const meta = (await (await fetch(`${r.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      string[]
    >;
    expect(meta.grant_types_supported).toContain(GRANT);
    expect(meta.authorization_grant_profiles_supported).toEqual([
      'urn:ietf:params:oauth:grant-profile:id-jag',
    ]);
  });

  it('the SDK v2 CrossAppAccessProvider gets a token through the enterprise IdP and calls whoami through the gateway', async () => {
    const exchanged: Array<Record<string, string>> = [];
    const provider = new CrossAppAccessProvider({
      clientId: client.id,
      clientSecret: client.secret,
      expectedIssuer: r.issuer,
      assertion: async (ctx) => {
        exchanged.push({
          audience: ctx.authorizationServerUrl,
          resource: ctx.resourceUrl,
          scope: ctx.scope ?? '',
        });
        const result = await requestJwtAuthorizationGrant({
          tokenEndpoint: ent.tokenEndpoint,
          audience: ctx.authorizationServerUrl,
          resource: ctx.resourceUrl,
          idToken: ent.idTokenFor(alice.email),
          clientId: client.id,
          scope: ctx.scope,
          fetchFn: ctx.fetchFn,
        });
        return result.jwtAuthGrant;
      },
    });
    const transport = new StreamableHTTPClientTransport(new URL(r.serverUrl('platform')), {
      authProvider: provider,
    });
    const mcp = new Client({ name: 'enterprise-assistant', version: '1.0.0' });
    await mcp.connect(transport);
    const me = toolJson(await mcp.callTool({ name: 'whoami', arguments: {} }));
    await mcp.close();
    expect(me).toMatchObject({ email: alice.email, sub: alice.sub, client_id: client.id });
    expect(exchanged).toEqual([
      { audience: r.issuer, resource: r.serverUrl('platform'), scope: 'mcp:platform' },
    ]);

    const tokens = provider.tokens()!;
    expect(tokens.refresh_token).toBeUndefined();
    expect(tokens.scope).toBe('mcp:platform');
    const claims = decodeJwt(tokens.access_token);
    expect(claims).toMatchObject({
      sub: alice.sub,
      email: alice.email,
      azp: client.id,
      scope: 'mcp:platform',
    });
    // Restricted to the grant's resource: another service refuses it.
    expect(await gatewayStatus(r.serverUrl('mail'), tokens.access_token)).toBe(403);

    const audit = await adminApi('GET', `/admin/api/audit?client_id=${encodeURIComponent(client.id)}`);
    const issued = (audit.json.items as Array<Record<string, unknown>>).filter((i) => i.event === 'issued');
    expect(issued).toHaveLength(1);
    expect(issued[0]).toMatchObject({
      grant_type: GRANT,
      email: alice.email,
      subject: alice.sub,
      scope: 'mcp:platform',
      detail: { assertion_issuer: ent.issuer },
    });
  });

  it('scope: the grant’s without a request, the intersection with one; unknown scopes dropped', async () => {
    const none = await redeem(await grantFor(alice.email, { scope: undefined }));
    expect(none.status, none.text).toBe(200);
    expect(none.json.scope).toBe('mcp:platform');
    const wide = await redeem(
      await grantFor(alice.email, { scope: 'mcp:platform mcp:mail platform:admin' }),
      client,
      {
        scope: 'mcp:platform openid unknown:thing',
      },
    );
    expect(wide.json.scope).toBe('mcp:platform');
    expect(wide.json.refresh_token).toBeUndefined();
    expect(wide.json.id_token).toBeUndefined();
    // The request's resource, the grant's: accepted (trailing slash or not).
    const same = await redeem(await grantFor(alice.email), client, {
      resource: `${r.serverUrl('platform')}/`,
    });
    expect(same.status, same.text).toBe(200);
  });

  it('refused with the documented error for each broken rule', async () => {
    const bob = await entitledUser();
    const unentitled = await seedUser(r.stack.db.pool);
    const blocked = await entitledUser();
    expect((await adminApi('POST', '/admin/api/block', { email: blocked.email })).status).toBe(200);
    const now = Math.floor(Date.now() / 1000);
    const jti = crypto.randomUUID();
    expect((await redeem(await grantFor(bob.email, { jti }))).status).toBe(200);

    type Answer = Awaited<ReturnType<typeof redeem>>;
    const cases: Array<[string, () => Promise<Answer>, number, string]> = [
      [
        'untrusted issuer',
        async () =>
          redeem(
            await rogue.sign({
              email: bob.email,
              aud: r.issuer,
              client_id: client.id,
              resource: r.serverUrl('platform'),
              scope: 'mcp:platform',
            }),
          ),
        400,
        'invalid_grant',
      ],
      [
        'wrong audience',
        async () => redeem(await grantFor(bob.email, { aud: 'https://other-as.example' })),
        400,
        'invalid_grant',
      ],
      ['reused jti', async () => redeem(await grantFor(bob.email, { jti })), 400, 'invalid_grant'],
      [
        "another client's grant",
        async () => redeem(await grantFor(bob.email, { client_id: other.id })),
        400,
        'invalid_grant',
      ],
      [
        'expired',
        async () => redeem(await grantFor(bob.email, { iat: now - 600, exp: now - 120 })),
        400,
        'invalid_grant',
      ],
      ['unentitled user', async () => redeem(await grantFor(unentitled.email)), 400, 'invalid_grant'],
      ['blocked user', async () => redeem(await grantFor(blocked.email)), 400, 'invalid_grant'],
      ['unknown user', async () => redeem(await grantFor('nobody-here@example.com')), 400, 'invalid_grant'],
      [
        'scopes beyond the grant',
        async () => redeem(await grantFor(bob.email), client, { scope: 'mcp:mail' }),
        400,
        'invalid_scope',
      ],
      [
        'grant without the resource’s scope',
        async () => redeem(await grantFor(bob.email, { scope: 'mcp:mail' })),
        400,
        'invalid_grant',
      ],
      [
        'typ not oauth-id-jag+jwt',
        async () => redeem(await grantFor(bob.email, { typ: 'JWT' })),
        400,
        'invalid_grant',
      ],
      [
        'resource not ours',
        async () => redeem(await grantFor(bob.email, { resource: 'https://mcp.elsewhere.example/mcp' })),
        400,
        'invalid_grant',
      ],
      [
        'no resource',
        async () => redeem(await grantFor(bob.email, { resource: undefined })),
        400,
        'invalid_grant',
      ],
      [
        'request resource not the grant’s',
        async () => redeem(await grantFor(bob.email), client, { resource: r.serverUrl('mail') }),
        400,
        'invalid_target',
      ],
      [
        'lives too long',
        async () => redeem(await grantFor(bob.email, { exp: now + 7200 })),
        400,
        'invalid_grant',
      ],
      [
        'issued in the future',
        async () => redeem(await grantFor(bob.email, { iat: now + 600, exp: now + 900 })),
        400,
        'invalid_grant',
      ],
      [
        'no email claim',
        async () => redeem(await grantFor(bob.email, { email: undefined })),
        400,
        'invalid_grant',
      ],
      [
        'wrong client secret',
        async () => redeem(await grantFor(bob.email), { id: client.id, secret: 'wrong' }),
        401,
        'invalid_client',
      ],
      [
        'issuer limited to other clients',
        async () =>
          redeem(
            await restricted.sign({
              email: bob.email,
              aud: r.issuer,
              client_id: client.id,
              resource: r.serverUrl('platform'),
            }),
          ),
        400,
        'unauthorized_client',
      ],
    ];
    for (const [name, attempt, status, error] of cases) {
      const res = await attempt();
      expect({ name, status: res.status, error: res.json.error }).toEqual({ name, status, error });
      expect(typeof res.json.error_description, name).toBe('string');
    }
  });

  it('a public client, and no client at all, get invalid_client; a machine client unauthorized_client', async () => {
    // Registered for the grant (as Claude.ai registers), but public: an ID-JAG needs client authentication.
    const pub = await r.register({
      client_name: 'public',
      redirect_uris: ['http://127.0.0.1/cb'],
      grant_types: ['authorization_code', 'refresh_token', GRANT],
    });
    const grant = await ent.sign({
      email: alice.email,
      aud: r.issuer,
      client_id: String(pub.json.client_id),
      resource: r.serverUrl('platform'),
    });
    const publicRes = await postForm(`${r.issuer}/oauth/token`, {
      grant_type: GRANT,
      assertion: grant,
      client_id: String(pub.json.client_id),
    });
    expect({ status: publicRes.status, error: publicRes.json.error }).toEqual({
      status: 401,
      error: 'invalid_client',
    });
    const anonymous = await postForm(`${r.issuer}/oauth/token`, {
      grant_type: GRANT,
      assertion: await grantFor(alice.email),
    });
    expect({ status: anonymous.status, error: anonymous.json.error }).toEqual({
      status: 401,
      error: 'invalid_client',
    });

    const key = await newMachineKey();
    const added = await adminApi('POST', '/admin/api/clients', {
      name: 'ci',
      jwks: key.jwks,
      email: alice.email,
      services: ['platform'],
    });
    const machineId = String(added.json.client_id);
    const machine = await postForm(`${r.issuer}/oauth/token`, {
      grant_type: GRANT,
      assertion: await grantFor(alice.email, { client_id: machineId }),
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: await key.assertion(machineId, r.issuer),
    });
    expect({ status: machine.status, error: machine.json.error }).toEqual({
      status: 400,
      error: 'unauthorized_client',
    });
  });

  it('a grant signed by a key the issuer does not publish is refused; the key set is refetched at most once per cooldown', async () => {
    // Warm: the key set is cached.
    expect((await redeem(await grantFor(alice.email))).status).toBe(200);
    const before = ent.jwksFetches();
    for (let i = 0; i < 5; i++) {
      const res = await redeem(
        await ent.sign(
          { email: alice.email, aud: r.issuer, client_id: client.id, resource: r.serverUrl('platform') },
          { foreignKey: true },
        ),
      );
      expect(res.json.error).toBe('invalid_grant');
    }
    expect(ent.jwksFetches() - before).toBeLessThanOrEqual(1);
  });

  // Issue 34: any trusted issuer could name any platform user (the grant's sub unused, nothing tying an issuer to
  // its own users). Now email_domains ties an issuer to its domains (and a domain one issuer lists is no other
  // issuer's), and subject_provider matches the grant's sub to the user's account at that issuer.
  it("an issuer names only its own users: email_domains, another issuer's domain, subject_provider", async () => {
    const corpUser = await seedUser(r.stack.db.pool, {
      email: `dev-${crypto.randomUUID().slice(0, 8)}@corp.example`,
    });
    expect(
      (await adminApi('POST', '/admin/api/entitlements', { service: 'platform', email: corpUser.email }))
        .status,
    ).toBe(200);
    const by = (idp: EnterpriseIdp, email: string, sub?: string) =>
      idp
        .sign({
          email,
          sub,
          aud: r.issuer,
          client_id: client.id,
          resource: r.serverUrl('platform'),
        })
        .then((g) => redeem(g));
    const answer = async (p: Promise<Awaited<ReturnType<typeof redeem>>>) => {
      const res = await p;
      return `${res.status} ${res.json.error ?? ''}${res.status === 400 ? ` ${res.json.error_description}` : ''}`;
    };
    // corp names a user outside corp.example: refused. Its own user (any case): accepted.
    expect(await answer(by(corp, alice.email))).toMatch(/^400 invalid_grant .*outside the email domains/);
    expect(await answer(by(corp, corpUser.email.toUpperCase()))).toBe('200 ');
    // ent, with no email_domains, may not name a user of the domain corp is trusted for; its own users still work.
    expect(await answer(by(ent, corpUser.email))).toMatch(/^400 invalid_grant .*outside the email domains/);
    expect(await answer(by(ent, alice.email))).toBe('200 ');
    // okta: the grant's sub must be the user's okta account.
    await r.stack.db.pool.query(
      `INSERT INTO accounts ("userId", type, provider, "providerAccountId") VALUES ($1, 'oidc', 'okta', '00u-alice')`,
      [alice.id],
    );
    expect(await answer(by(okta, alice.email, '00u-mallory'))).toMatch(
      /^400 invalid_grant .*subject_provider/,
    );
    // `*` is any domain no other issuer lists: corp.example stays corp's.
    expect(await answer(by(okta, corpUser.email, '00u-alice'))).toMatch(/outside the email domains/);
    // Another user's okta account is not this user's.
    const dave = await entitledUser();
    expect(await answer(by(okta, dave.email, '00u-alice'))).toMatch(/^400 invalid_grant .*subject_provider/);
    expect(await answer(by(okta, alice.email, alice.sub))).toMatch(/^400 invalid_grant/);
    expect(await answer(by(okta, alice.email, '00u-alice'))).toBe('200 ');
  });

  it('revoke-user cuts a token issued for an ID-JAG at the gateway', async () => {
    const carol = await entitledUser();
    const t = await redeem(await grantFor(carol.email));
    const token = String(t.json.access_token);
    expect(await gatewayStatus(r.serverUrl('platform'), token)).toBe(200);
    expect((await adminApi('POST', '/admin/api/revoke-user', { email: carol.email })).status).toBe(200);
    await expect
      .poll(() => gatewayStatus(r.serverUrl('platform'), token), { timeout: 1000, interval: 50 })
      .toBe(401);
  });
});
