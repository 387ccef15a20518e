// 2026's published attacks on other OAuth and OpenID Connect servers, replayed against ours: one real IdP, gateway
// and tool servers (started once for the file), a seeded user, two stand-in enterprise IdPs. Each attack names its
// advisory (CVE or GHSA id and the project's issue) and sits beside a control showing that the legitimate flow it
// abuses still works. docs/security.md § Published attacks on other OAuth servers, replayed has one row each.
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callAdminApi } from '../helpers/admin-api.ts';
import { basicAuth, type ReplayStack, startReplayStack } from '../helpers/client-replay.ts';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import {
  answerDevicePage,
  openDevicePage,
  pollDevice,
  skipPollInterval,
  startDevice,
} from '../helpers/device.ts';
import { newDpopKey } from '../helpers/dpop.ts';
import { type EnterpriseIdp, startEnterpriseIdp } from '../helpers/enterprise-idp.ts';
import { gatewayStatus } from '../helpers/machine-clients.ts';
import { CLI, pkcePair, signIn } from '../helpers/oauth.ts';

const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ADMIN = `adv-admin-${crypto.randomUUID().slice(0, 8)}@example.com`;
/** The one https callback the operator lists (PLATFORM_ALLOWED_REDIRECT_URIS). */
const APP_CB = 'https://app.example.com/cb';
const LOOP = 'http://127.0.0.1:43123/cb';

let r: ReplayStack;
let ent: EnterpriseIdp;
let ent2: EnterpriseIdp;
let adminToken: string;
const issuersFile = join(tmpdir(), `trusted-issuers-advisories-${crypto.randomUUID()}.yaml`);

beforeAll(async () => {
  [ent, ent2] = await Promise.all([startEnterpriseIdp(), startEnterpriseIdp()]);
  await writeFile(
    issuersFile,
    `issuers:
  - issuer: ${ent.issuer}
    jwks_uri: ${ent.jwksUri}
    kind: id-jag
    email_domains: ["*"]
  - issuer: ${ent2.issuer}
    jwks_uri: ${ent2.jwksUri}
    kind: id-jag
    email_domains: ["*"]
`,
  );
  r = await startReplayStack({
    allowedRedirectUris: [APP_CB],
    // Client ID Metadata Documents on the stack's https server: one with a look-alike loopback redirect URI.
    documents: (origin) => ({
      '/lookalike.json': {
        client_id: `${origin}/lookalike.json`,
        redirect_uris: ['http://localhost.evil.example/cb'],
        token_endpoint_auth_method: 'none',
      },
      '/loopback.json': {
        client_id: `${origin}/loopback.json`,
        redirect_uris: [LOOP],
        token_endpoint_auth_method: 'none',
      },
    }),
    idpEnv: { PLATFORM_ADMIN_EMAILS: ADMIN, PLATFORM_TRUSTED_ISSUERS_FILE: issuersFile },
  });
  const admin = await seedUser(r.stack.db.pool, { email: ADMIN });
  adminToken = (await signIn(r.issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
}, 120_000);

afterAll(async () => {
  await r?.stop();
  await Promise.all([ent?.close(), ent2?.close()]);
});

/** Dynamic registration; the answer's client id and secret (when confidential). */
async function register(body: Record<string, unknown>): Promise<{ id: string; secret?: string }> {
  const reg = await r.register({ client_name: 'advisory replay', redirect_uris: [LOOP], ...body });
  expect(reg.status, reg.text).toBe(201);
  return { id: String(reg.json.client_id), secret: reg.json.client_secret as string | undefined };
}

/** Registration's answer (status and error) for these redirect URIs. */
async function registerStatus(redirectUris: string[]): Promise<string> {
  const reg = await r.register({ client_name: 'advisory replay', redirect_uris: redirectUris });
  return `${reg.status} ${reg.json.error ?? ''}`.trim();
}

/** An authorization code for the stack's user (consent approved), and its verifier. */
async function codeFor(
  clientId: string,
  o: { redirectUri?: string; params?: Record<string, string> } = {},
): Promise<{ code: string; verifier: string; redirectUri: string }> {
  const { verifier, challenge } = pkcePair();
  const redirectUri = o.redirectUri ?? LOOP;
  const a = await r.authorize({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'st',
    scope: 'openid mcp:platform',
    ...o.params,
  });
  expect(a.status, a.body.slice(0, 300)).toBe(302);
  expect(a.code).toBeDefined();
  return { code: a.code!, verifier, redirectUri };
}

const redeem = (
  c: { code: string; verifier: string; redirectUri: string },
  clientId: string,
  extra: Record<string, string> = {},
  headers: Record<string, string> = {},
) =>
  r.token(
    {
      grant_type: 'authorization_code',
      code: c.code,
      code_verifier: c.verifier,
      redirect_uri: c.redirectUri,
      ...(headers.authorization ? {} : { client_id: clientId }),
      ...extra,
    },
    headers,
  );

/** An authorize request that must be answered on an IdP page (400), never redirected anywhere. */
async function expectNoRedirect(params: Record<string, string>): Promise<string> {
  const a = await r.authorize({
    response_type: 'code',
    code_challenge: pkcePair().challenge,
    code_challenge_method: 'S256',
    state: 'st',
    scope: 'openid',
    ...params,
  });
  expect({ status: a.status, location: a.location?.href }, JSON.stringify(params)).toEqual({
    status: 400,
    location: undefined,
  });
  return a.body;
}

const errorOf = (a: { status: number; json: Record<string, unknown> }) => `${a.status} ${a.json.error}`;

describe('codes, grants and single-use stores', () => {
  // CVE-2026-16089 (Keycloak, keycloak/keycloak#51003): an authorization code issued to one client was redeemed
  // by another client that knew it (same redirect URI, its own credentials).
  it('CVE-2026-16089: a code issued to one client is refused to another, public or confidential', async () => {
    const a = await register({});
    const b = await register({});
    const c = await register({ token_endpoint_auth_method: 'client_secret_basic' });
    const code = await codeFor(a.id);
    expect(errorOf(await redeem(code, b.id))).toBe('400 invalid_grant');
    const code2 = await codeFor(a.id);
    expect(errorOf(await redeem(code2, c.id, {}, basicAuth(c.id, c.secret!)))).toBe('400 invalid_grant');
    // Control: the client the code was issued to redeems it, and the token works at the gateway.
    const own = await redeem(await codeFor(a.id), a.id);
    expect(own.status, own.text).toBe(200);
    expect(await r.whoami(own.json.access_token as string)).toMatchObject({ email: r.user.email });
  });

  // CVE-2026-9792 (Keycloak, keycloak/keycloak#49436): a grant the client was not allowed reached through another
  // path. Here (issue 34): a client registered for authorization_code only redeemed an ID-JAG.
  it('CVE-2026-9792: grants a client did not register for are refused (ID-JAG, device code, client credentials)', async () => {
    const codeOnly = await register({
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['authorization_code', 'refresh_token'],
    });
    const grant = (clientId: string) =>
      ent.sign({
        email: r.user.email,
        aud: r.issuer,
        client_id: clientId,
        resource: r.serverUrl('platform'),
      });
    const idJag = await r.token(
      { grant_type: JWT_BEARER, assertion: await grant(codeOnly.id) },
      basicAuth(codeOnly.id, codeOnly.secret!),
    );
    expect(errorOf(idJag)).toBe('400 unauthorized_client');
    const device = await r.token(
      { grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: 'x'.repeat(43) },
      basicAuth(codeOnly.id, codeOnly.secret!),
    );
    expect(errorOf(device)).toBe('400 unauthorized_client');
    const machine = await r.token(
      { grant_type: 'client_credentials' },
      basicAuth(codeOnly.id, codeOnly.secret!),
    );
    expect(errorOf(machine)).toBe('400 unauthorized_client');
    // Control: the same kind of client, registered for jwt-bearer, redeems the grant; and codeOnly still signs in.
    const enterprise = await register({
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['authorization_code', JWT_BEARER],
    });
    const ok = await r.token(
      { grant_type: JWT_BEARER, assertion: await grant(enterprise.id) },
      basicAuth(enterprise.id, enterprise.secret!),
    );
    expect(ok.status, ok.text).toBe(200);
    const signedIn = await redeem(
      await codeFor(codeOnly.id),
      codeOnly.id,
      {},
      basicAuth(codeOnly.id, codeOnly.secret!),
    );
    expect(signedIn.status, signedIn.text).toBe(200);
    expect(
      (
        await r.token(
          { grant_type: 'refresh_token', refresh_token: signedIn.json.refresh_token as string },
          basicAuth(codeOnly.id, codeOnly.secret!),
        )
      ).status,
    ).toBe(200);
  });

  // CVE-2026-4282 (Keycloak, keycloak/keycloak#47719): one single-use store without namespaces: a value recorded
  // for one purpose was accepted for another (forged codes). Ours: each kind of secret is looked up only where it
  // belongs, and assertion jtis are kept per issuer.
  it('CVE-2026-4282: a refresh token is not a code, a code not a refresh token or device code; jtis are per issuer', async () => {
    const client = await register({});
    const code = await codeFor(client.id);
    // The code presented as a refresh token and as a device code: refused, and not consumed by that.
    expect(
      errorOf(await r.token({ grant_type: 'refresh_token', refresh_token: code.code, client_id: client.id })),
    ).toBe('400 invalid_grant');
    expect(
      errorOf(
        await r.token({
          grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
          device_code: code.code,
          client_id: CLI,
        }),
      ),
    ).toBe('400 invalid_grant');
    const tokens = await redeem(code, client.id);
    expect(tokens.status, tokens.text).toBe(200);
    // The refresh token presented as a code: refused.
    const asCode = await redeem(
      { code: tokens.json.refresh_token as string, verifier: code.verifier, redirectUri: LOOP },
      client.id,
    );
    expect(errorOf(asCode)).toBe('400 invalid_grant');

    // The same jti from two issuers: each issuer's own (the second is not a replay); again from the first: refused.
    const enterprise = await register({
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: [JWT_BEARER],
    });
    const jti = crypto.randomUUID();
    const from = (idp: EnterpriseIdp) =>
      idp
        .sign({
          email: r.user.email,
          aud: r.issuer,
          client_id: enterprise.id,
          resource: r.serverUrl('platform'),
          jti,
        })
        .then((assertion) =>
          r.token({ grant_type: JWT_BEARER, assertion }, basicAuth(enterprise.id, enterprise.secret!)),
        );
    expect((await from(ent)).status).toBe(200);
    expect((await from(ent2)).status).toBe(200);
    expect(errorOf(await from(ent))).toBe('400 invalid_grant');
  });

  // CVE-2026-16103 (Keycloak, keycloak/keycloak#50996): a lockout set after a device (or backchannel)
  // authorization began did not stop the pending flow from being redeemed.
  it('CVE-2026-16103: a block after a device flow began stops it, approved or not', async () => {
    const adminApi = (path: string, body: unknown) => callAdminApi(r.issuer, adminToken, 'POST', path, body);
    const bob: SeededUser = await seedUser(r.stack.db.pool);
    const approved = await startDevice(r.issuer, { scope: 'openid mcp:platform' });
    expect((await answerDevicePage(r.issuer, approved, bob.sessionToken, 'approve')).status).toBe(200);
    const pending = await startDevice(r.issuer, { scope: 'openid mcp:platform' });
    expect((await adminApi('/admin/api/block', { email: bob.email })).status).toBe(200);
    await skipPollInterval(r.stack.db.pool, approved.device_code);
    // Revoked by the block (invalid_grant), or refused as the user's (access_denied): no token either way.
    expect(['400 invalid_grant', '400 access_denied']).toContain(
      errorOf(await pollDevice(r.issuer, approved.device_code)),
    );
    // The pending one: the blocked user cannot approve it, and it yields nothing.
    const page = await openDevicePage(r.issuer, pending.verification_uri_complete, bob.sessionToken);
    expect(page.body).toContain('blocked');
    await skipPollInterval(r.stack.db.pool, pending.device_code);
    const polled = await pollDevice(r.issuer, pending.device_code);
    expect(polled.status).toBe(400);
    expect(polled.json.access_token).toBeUndefined();
    // Control: another user's device flow completes and its token works at the gateway.
    const carol = await seedUser(r.stack.db.pool);
    const d = await startDevice(r.issuer, { scope: 'openid mcp:platform' });
    expect((await answerDevicePage(r.issuer, d, carol.sessionToken, 'approve')).status).toBe(200);
    await skipPollInterval(r.stack.db.pool, d.device_code);
    const ok = await pollDevice(r.issuer, d.device_code);
    expect(ok.status, ok.text).toBe(200);
    expect(await gatewayStatus(r.serverUrl('platform'), ok.json.access_token as string)).toBe(200);
  });

  // GHSA-p2fr-6hmx-4528 (Better Auth): the `resource` of a token request was not bound to the one the grant was
  // made for, so a code for one resource bought a token for another.
  it('GHSA-p2fr-6hmx-4528: a code granted for one resource is refused for another (invalid_target)', async () => {
    const client = await register({});
    const mail = r.serverUrl('mail');
    const platform = r.serverUrl('platform');
    const code = await codeFor(client.id, {
      params: { resource: mail, scope: 'openid mcp:mail mcp:platform' },
    });
    const other = await redeem(code, client.id, { resource: platform });
    expect(errorOf(other)).toBe('400 invalid_target');
    const control = await redeem(await codeFor(client.id, { params: { resource: mail } }), client.id, {
      resource: mail,
    });
    expect(control.status, control.text).toBe(200);
    const refreshed = await r.token({
      grant_type: 'refresh_token',
      refresh_token: control.json.refresh_token as string,
      client_id: client.id,
      resource: platform,
    });
    expect(errorOf(refreshed)).toBe('400 invalid_target');
  });

  it('GHSA-p2fr-6hmx-4528 (and at the gateway): a token granted for one resource is refused by another service', async () => {
    const client = await register({});
    const mail = r.serverUrl('mail');
    const t = await redeem(
      await codeFor(client.id, { params: { resource: mail, scope: 'openid mcp:mail' } }),
      client.id,
      { resource: mail },
    );
    expect(t.status, t.text).toBe(200);
    expect(await gatewayStatus(r.serverUrl('platform'), t.json.access_token as string)).toBe(403);
    // Control: the service it was granted for serves it.
    expect(await gatewayStatus(mail, t.json.access_token as string)).toBe(200);
  });

  // keycloak/keycloak#48428: implicit and hybrid flows handed unbound Bearer tokens to a client registered with
  // dpop_bound_access_tokens.
  it('keycloak#48428: a DPoP-required client gets no token without a proof, from any response type', async () => {
    const client = await register({ dpop_bound_access_tokens: true });
    for (const responseType of ['token', 'code id_token', 'code token', 'id_token token']) {
      const a = await r.authorize({
        response_type: responseType,
        client_id: client.id,
        redirect_uri: LOOP,
        code_challenge: pkcePair().challenge,
        code_challenge_method: 'S256',
        state: 'st',
        nonce: 'n',
        scope: 'openid mcp:platform',
      });
      const fragment = new URLSearchParams(a.location?.hash.slice(1) ?? '');
      expect(fragment.get('access_token'), responseType).toBeNull();
      expect(a.location?.searchParams.get('code') ?? null, responseType).toBeNull();
    }
    const code = await codeFor(client.id);
    const bare = await redeem(code, client.id);
    expect(errorOf(bare)).toBe('400 invalid_dpop_proof');
    // Control: with a proof, a DPoP-bound token; presented as a Bearer token at the gateway it is refused.
    const key = await newDpopKey();
    const proof = await key.proof('POST', `${r.issuer}/oauth/token`);
    const bound = await redeem(await codeFor(client.id), client.id, {}, { dpop: proof });
    expect(bound.status, bound.text).toBe(200);
    expect(bound.json.token_type).toBe('DPoP');
    expect(await gatewayStatus(r.serverUrl('platform'), bound.json.access_token as string)).toBe(401);
  });
});

describe('redirect URIs', () => {
  // CVE-2026-18211 (Keycloak, keycloak/keycloak#51285): `localhost.evil` passed a "starts with localhost" check
  // for loopback redirect URIs at registration.
  it('CVE-2026-18211: look-alike loopback hosts are refused at registration; real loopback URIs are accepted', async () => {
    for (const uri of [
      'http://localhost.evil.example/cb',
      'http://localhost.evil/cb',
      'http://127.0.0.1.evil.example/cb',
      'http://127.0.0.1.nip.io/cb',
      'http://localhost:8080.evil.example/cb',
      'http://[::1].evil.example/cb',
      'http://0x7f000001/cb',
      'http://2130706433/cb',
      'http://127.1/cb',
    ])
      expect(await registerStatus([uri]), uri).toBe('400 invalid_redirect_uri');
    // Control.
    for (const uri of ['http://localhost:8080/cb', 'http://127.0.0.1/cb', 'http://[::1]:9000/cb'])
      expect(await registerStatus([uri]), uri).toBe('201');
    // The same through a Client ID Metadata Document: the look-alike document is refused on an IdP page; a
    // document with a real loopback URI signs in.
    const page = await expectNoRedirect({
      client_id: `${r.docsOrigin}/lookalike.json`,
      redirect_uri: 'http://localhost.evil.example/cb',
    });
    expect(page).toContain('is neither loopback nor on');
    const doc = await codeFor(`${r.docsOrigin}/loopback.json`);
    expect((await redeem(doc, `${r.docsOrigin}/loopback.json`)).status).toBe(200);
  });

  // CVE-2026-7504 (Keycloak, keycloak/keycloak#49109) and zitadel/zitadel#12559: several `@`, or `%25@`, in the
  // authority made the validator and the browser disagree on the host.
  it('CVE-2026-7504 and zitadel#12559: userinfo and %25@ tricks are refused at registration and at authorize', async () => {
    const tricks = [
      'http://127.0.0.1@evil.example/cb',
      'http://evil.example@127.0.0.1/cb',
      'http://a@b@127.0.0.1/cb',
      'http://127.0.0.1:43123@evil.example@127.0.0.1/cb',
      'http://127.0.0.1%25@evil.example/cb',
      'http://evil.example%25@127.0.0.1/cb',
      'https://app.example.com@evil.example/cb',
      'https://app.example.com%25@evil.example/cb',
      'https://evil.example@app.example.com/cb',
    ];
    for (const uri of tricks) expect(await registerStatus([uri]), uri).toBe('400 invalid_redirect_uri');
    const app = await register({ redirect_uris: [APP_CB, LOOP] });
    for (const uri of [
      ...tricks,
      'http://127.0.0.1:43123@evil.example/cb',
      'http://127.0.0.1:5555@evil.example/callback',
    ]) {
      await expectNoRedirect({ client_id: app.id, redirect_uri: uri });
      await expectNoRedirect({ client_id: CLI, redirect_uri: uri });
    }
    // Control: the registered URIs, and the CLI's loopback on any port.
    await codeFor(app.id, { redirectUri: APP_CB });
    const cli = await codeFor(CLI, { redirectUri: 'http://127.0.0.1:5555/callback' });
    expect(cli.code).toBeTruthy();
  });

  // CVE-2026-3872 (Keycloak, keycloak/keycloak#47718): `..;/` (and other dot segments) in a redirect path passed a
  // prefix match and reached another path once a server normalised it.
  it('CVE-2026-3872: dot segments and ..;/ in a redirect path never match the registered one', async () => {
    for (const uri of [
      `${APP_CB}/..;/admin`,
      `${APP_CB}/../admin`,
      'https://app.example.com/cb/%2e%2e/admin',
    ])
      expect(await registerStatus([uri]), uri).toBe('400 invalid_redirect_uri');
    const app = await register({ redirect_uris: [APP_CB, LOOP] });
    for (const uri of [
      `${APP_CB}/..;/admin`,
      `${APP_CB}/../admin`,
      'https://app.example.com/cb/..;/',
      'https://app.example.com/cb;/../admin',
      `${APP_CB}/`,
      'http://127.0.0.1:43123/cb/..;/admin',
      'http://127.0.0.1:43123/cb/../x',
    ]) {
      await expectNoRedirect({ client_id: app.id, redirect_uri: uri });
    }
    await expectNoRedirect({ client_id: CLI, redirect_uri: 'http://127.0.0.1:5555/callback/..;/x' });
    // Control.
    const ok = await codeFor(app.id, { redirectUri: APP_CB });
    expect(ok.code).toBeTruthy();
  });

  // authlib CVE-2026-41479 and CVE-2026-44681 (authlib/authlib#918): an error response was redirected to a
  // redirect_uri that had not been validated (an unregistered one, or one of an unknown client).
  it('CVE-2026-41479 / CVE-2026-44681: errors go to a validated redirect URI only', async () => {
    const app = await register({ redirect_uris: [LOOP] });
    const evil = 'https://evil.example/cb';
    // Errors of every kind with an unregistered URI, an unknown client, no client: a page, never a redirect.
    await expectNoRedirect({ client_id: app.id, redirect_uri: evil, response_type: 'token' });
    await expectNoRedirect({ client_id: app.id, redirect_uri: evil, scope: 'x'.repeat(5000) });
    await expectNoRedirect({ client_id: app.id, redirect_uri: evil, code_challenge_method: 'plain' });
    await expectNoRedirect({ client_id: 'no-such-client', redirect_uri: evil });
    await expectNoRedirect({ client_id: 'no-such-client', redirect_uri: evil, response_type: 'token' });
    await expectNoRedirect({ redirect_uri: evil });
    // Control: the same error with the registered URI goes back to the client, as RFC 6749 §4.1.2.1 says.
    const a = await r.authorize({
      response_type: 'token',
      client_id: app.id,
      redirect_uri: LOOP,
      state: 'st',
    });
    expect(a.status).toBe(302);
    expect(`${a.location?.origin}${a.location?.pathname}`).toBe(LOOP);
    expect(a.location?.searchParams.get('error')).toBe('unsupported_response_type');
    expect(a.location?.searchParams.get('state')).toBe('st');
  });
});
