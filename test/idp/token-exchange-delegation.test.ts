// Service-to-service delegation (RFC 8693 with `act`): a machine client registered with `platform admin clients add
// --may-act` exchanges a user's platform access token for a narrowed one that names it in `act`. Real IdP, two real
// gateways and tool servers, real Postgres and Redis, the real `platform admin` command: the exchanged token's
// claims, nesting, whoami through the gateway, the refusals (no --may-act, a public or user client, no client, the
// gateway's client, a revoked or blocked subject), and the revocation cascade (the subject token, the machine
// client, the user) seen at both gateways within 1 s.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPlatform } from '../cli/support.ts';
import { callAdminApi } from '../helpers/admin-api.ts';
import { lockWaiters, type SeededUser, seedUser } from '../helpers/database.ts';
import { gatewayStatus, type MachineKey, newMachineKey } from '../helpers/machine-clients.ts';
import { postForm, signIn } from '../helpers/oauth.ts';
import type { GatewayProcess } from '../helpers/processes.ts';
import { toolJson } from '../tools/helpers.ts';
import { type Stack, startStack } from '../tools/stack.ts';

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const ADMIN = `te-admin-${crypto.randomUUID().slice(0, 8)}@example.com`;
const GATEWAY_SECRET = 'te-gateway-client-secret-0123456789abcdefghijklmnop';

let stack: Stack;
let second: GatewayProcess;
let issuer: string;
let adminToken: string;
let key: MachineKey;
let botEmail: string;

beforeAll(async () => {
  stack = await startStack({
    idpEnv: { PLATFORM_ADMIN_EMAILS: ADMIN, PLATFORM_GATEWAY_CLIENT_SECRET: GATEWAY_SECRET },
  });
  issuer = stack.idp.issuer;
  second = await stack.anotherGateway();
  const admin = await seedUser(stack.db.pool, { email: ADMIN });
  adminToken = (await signIn(issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
  botEmail = (await seedUser(stack.db.pool, { email: `bot-${crypto.randomUUID().slice(0, 8)}@example.com` }))
    .email;
  key = await newMachineKey();
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

const admin = (args: string[]) =>
  runPlatform(['admin', ...args, '--issuer', issuer, '--token', adminToken], { HOME: '/nonexistent' });

async function addClient(services: string[], mayAct: boolean): Promise<string> {
  const out = await admin([
    'clients',
    'add',
    '--name',
    'report builder',
    '--jwks-file',
    key.jwksFile,
    '--email',
    botEmail,
    ...services.flatMap((s) => ['--service', s]),
    ...(mayAct ? ['--may-act'] : []),
    '--json',
  ]);
  expect(out.stderr).toBe('');
  expect(out.code).toBe(0);
  return (JSON.parse(out.stdout) as { client_id: string }).client_id;
}

/** POST /oauth/token with the token-exchange grant, the machine client authenticated by private_key_jwt. */
async function exchange(clientId: string, subjectToken: string, extra: Record<string, string> = {}) {
  return postForm(`${issuer}/oauth/token`, {
    grant_type: EXCHANGE,
    subject_token: subjectToken,
    subject_token_type: ACCESS_TOKEN,
    resource: `${stack.baseUrl}/platform/mcp`,
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    client_assertion: await key.assertion(clientId, issuer),
    ...extra,
  });
}

async function userToken(user: SeededUser, scope = 'openid mcp:platform mcp:mail mcp:deals') {
  return (await signIn(issuer, user.sessionToken, { scope })).access_token;
}

async function whoami(token: string): Promise<Record<string, unknown>> {
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.baseUrl}/platform/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'delegation-test', version: '1.0.0' });
  await client.connect(transport);
  try {
    return toolJson(await client.callTool({ name: 'whoami', arguments: {} }));
  } finally {
    await client.close();
  }
}

const atFirst = (token: string) => gatewayStatus(`${stack.baseUrl}/platform/mcp`, token);
const atSecond = (token: string) => gatewayStatus(`${second.url}/platform/mcp`, token);

/** Every token refused (401) at both gateways within 1 s of `since`. */
async function refusedEverywhere(tokens: string[], since: number): Promise<void> {
  await Promise.all(
    tokens.flatMap((t) => [
      expect.poll(() => atFirst(t), { timeout: 1000, interval: 50 }).toBe(401),
      expect.poll(() => atSecond(t), { timeout: 1000, interval: 50 }).toBe(401),
    ]),
  );
  expect(Date.now() - since).toBeLessThanOrEqual(1000);
}

describe('token exchange with act (delegation)', () => {
  it('discovery lists the token-exchange grant', async () => {
    const meta = (await (await fetch(`${issuer}/.well-known/oauth-authorization-server`)).json()) as {
      grant_types_supported: string[];
    };
    expect(meta.grant_types_supported).toContain(EXCHANGE);
  });

  it("the exchanged token: the user's sub and email, the shared services, act, the machine client as azp, exp no later than the subject's, no refresh token", async () => {
    const user = await seedUser(stack.db.pool);
    const subject = await userToken(user);
    const s = decodeJwt(subject);
    const clientId = await addClient(['platform', 'mail'], true);
    // The exchange comes a second after the subject token was issued: a token living its own full hour from
    // the exchange would outlive the subject token.
    await new Promise((r) => setTimeout(r, 1100));
    const t = await exchange(clientId, subject);
    expect(t.status, t.text).toBe(200);
    expect(t.res.headers.get('cache-control')).toBe('no-store');
    expect(t.json).toMatchObject({
      issued_token_type: ACCESS_TOKEN,
      token_type: 'Bearer',
      scope: 'mcp:platform mcp:mail',
    });
    expect(t.json.refresh_token).toBeUndefined();
    expect(t.json.id_token).toBeUndefined();
    const c = decodeJwt(String(t.json.access_token));
    expect(c).toMatchObject({
      iss: issuer,
      aud: s.aud,
      sub: user.sub,
      email: user.email,
      scope: 'mcp:platform mcp:mail',
      act: { sub: clientId },
      azp: clientId,
      client_id: clientId,
    });
    expect(c.jti).not.toBe(s.jti);
    expect(c.exp).toBe(s.exp);
    expect(Number(t.json.expires_in)).toBeLessThanOrEqual(s.exp! - Math.floor(Date.now() / 1000) + 1);

    // A gateway takes it as the user's, issued to the machine client.
    expect(await whoami(String(t.json.access_token))).toMatchObject({
      email: user.email,
      sub: user.sub,
      client_id: clientId,
      issuer: 'platform',
    });

    // Audited: the grant, the client, the subject token's jti; resource chose the audience and narrowed nothing.
    const audit = await callAdminApi(
      issuer,
      adminToken,
      'GET',
      `/admin/api/audit?client_id=${encodeURIComponent(clientId)}`,
    );
    const rows = (audit.json.items as Array<Record<string, unknown>>).filter((i) => i.event === 'issued');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      grant_type: EXCHANGE,
      email: user.email,
      subject: user.sub,
      jti: c.jti,
      scope: 'mcp:platform mcp:mail',
      detail: { subject_jti: s.jti },
    });
  });

  it('a delegated token exchanged again nests the earlier actor in act (RFC 8693 §4.1) and narrows to both clients', async () => {
    const user = await seedUser(stack.db.pool);
    const subject = await userToken(user);
    const first = await addClient(['platform', 'mail'], true);
    const then = await addClient(['platform', 'deals'], true);
    const t1 = await exchange(first, subject);
    expect(t1.status, t1.text).toBe(200);
    const t2 = await exchange(then, String(t1.json.access_token));
    expect(t2.status, t2.text).toBe(200);
    const c = decodeJwt(String(t2.json.access_token));
    expect(c).toMatchObject({
      sub: user.sub,
      email: user.email,
      scope: 'mcp:platform',
      act: { sub: then, act: { sub: first } },
      azp: then,
    });
    expect(c.exp).toBeLessThanOrEqual(decodeJwt(String(t1.json.access_token)).exp!);
  });

  it('a scope asked for narrows; services the subject token lacks are never added', async () => {
    const user = await seedUser(stack.db.pool);
    const subject = await userToken(user, 'openid mcp:platform');
    const clientId = await addClient(['platform', 'mail'], true);
    const t = await exchange(clientId, subject);
    expect(t.json.scope).toBe('mcp:platform');
    const beyond = await exchange(clientId, subject, { scope: 'mcp:mail' });
    expect({ status: beyond.status, error: beyond.json.error }).toEqual({
      status: 400,
      error: 'invalid_scope',
    });
    const none = await exchange(await addClient(['deals'], true), subject);
    expect(none.json.error).toBe('invalid_scope');
  });

  it('a machine client registered without --may-act: 400 unauthorized_client', async () => {
    const user = await seedUser(stack.db.pool);
    const clientId = await addClient(['platform'], false);
    const t = await exchange(clientId, await userToken(user));
    expect({ status: t.status, error: t.json.error }).toEqual({ status: 400, error: 'unauthorized_client' });
    expect(String(t.json.error_description)).toMatch(/--may-act/);
    const listed = await callAdminApi(issuer, adminToken, 'GET', '/admin/api/machine-clients');
    const items = listed.json.items as Array<{ client_id: string; may_act: boolean }>;
    expect(items.find((i) => i.client_id === clientId)?.may_act).toBe(false);
  });

  it('a public client, a user’s confidential client, no client at all and the gateway’s client are refused', async () => {
    const user = await seedUser(stack.db.pool);
    const subject = await userToken(user);
    const form = {
      grant_type: EXCHANGE,
      subject_token: subject,
      subject_token_type: ACCESS_TOKEN,
      resource: `${stack.baseUrl}/platform/mcp`,
    };
    const url = `${issuer}/oauth/token`;
    const cli = await postForm(url, { ...form, client_id: 'platform-cli' });
    expect({ status: cli.status, error: cli.json.error }).toEqual({
      status: 400,
      error: 'unauthorized_client',
    });

    const reg = await fetch(`${issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'a user client',
        redirect_uris: ['http://127.0.0.1:9/cb'],
        token_endpoint_auth_method: 'client_secret_basic',
      }),
    });
    const { client_id, client_secret } = (await reg.json()) as { client_id: string; client_secret: string };
    const basic = (id: string, secret: string) =>
      `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
    const confidential = await postForm(url, form, { authorization: basic(client_id, client_secret) });
    expect({ status: confidential.status, error: confidential.json.error }).toEqual({
      status: 400,
      error: 'unauthorized_client',
    });

    const anonymous = await postForm(url, form);
    expect({ status: anonymous.status, error: anonymous.json.error }).toEqual({
      status: 401,
      error: 'invalid_client',
    });

    // The gateway's client exchanges for connections only, never for a platform token.
    const gateway = await postForm(url, form, { authorization: basic('platform-gateway', GATEWAY_SECRET) });
    expect({ status: gateway.status, error: gateway.json.error }).toEqual({
      status: 400,
      error: 'unauthorized_client',
    });
    // Nothing was issued to any of them.
    const audit = await callAdminApi(
      issuer,
      adminToken,
      'GET',
      `/admin/api/audit?email=${encodeURIComponent(user.email)}`,
    );
    const issued = (audit.json.items as Array<Record<string, unknown>>).filter((i) => i.event === 'issued');
    expect(issued.map((i) => i.grant_type)).toEqual(['authorization_code']);
  });

  it('a revoked, blocked or forged subject token: 400 invalid_grant', async () => {
    const clientId = await addClient(['platform'], true);
    const user = await seedUser(stack.db.pool);
    const revoked = await userToken(user);
    expect(
      (await postForm(`${issuer}/oauth/revoke`, { token: revoked, client_id: 'platform-cli' })).status,
    ).toBe(200);
    expect((await exchange(clientId, revoked)).json.error).toBe('invalid_grant');

    const blockedUser = await seedUser(stack.db.pool);
    const blocked = await userToken(blockedUser);
    expect((await admin(['block', '--email', blockedUser.email])).code).toBe(0);
    expect((await exchange(clientId, blocked)).json.error).toBe('invalid_grant');

    const [h, p] = (await userToken(await seedUser(stack.db.pool))).split('.');
    const forged = `${h}.${p}.${Buffer.from('not a signature').toString('base64url')}`;
    const f = await exchange(clientId, forged);
    expect({ status: f.status, error: f.json.error }).toEqual({ status: 400, error: 'invalid_grant' });
    const wrongType = await exchange(clientId, revoked, {
      subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
    });
    expect(wrongType.json.error).toBe('invalid_request');
    const elsewhere = await exchange(clientId, blocked, { resource: 'https://elsewhere.example/mcp' });
    expect(elsewhere.json.error).toBe('invalid_target');
  });
});

describe('revocation cascade: exchanged tokens refused at every gateway within 1 s', () => {
  /** A user's token, a token exchanged from it by one machine client, and that one exchanged by another. */
  async function chain() {
    const user = await seedUser(stack.db.pool);
    const subject = await userToken(user);
    const first = await addClient(['platform'], true);
    const then = await addClient(['platform'], true);
    const t1 = String((await exchange(first, subject)).json.access_token);
    const t2 = String((await exchange(then, t1)).json.access_token);
    for (const t of [t1, t2]) {
      expect(await atFirst(t)).toBe(200);
      expect(await atSecond(t)).toBe(200);
    }
    return { user, subject, first, then, t1, t2 };
  }

  it('revoking the subject token revokes the tokens exchanged from it, down the chain', async () => {
    const c = await chain();
    const r = await postForm(`${issuer}/oauth/revoke`, { token: c.subject, client_id: 'platform-cli' });
    expect(r.status).toBe(200);
    await refusedEverywhere([c.subject, c.t1, c.t2], Date.now());
    expect((await exchange(c.then, c.t1)).json.error).toBe('invalid_grant');
  });

  it('revoking the machine client revokes the tokens it exchanged, and the ones exchanged from those', async () => {
    const c = await chain();
    const out = await admin(['revoke-client', '--client-id', c.first]);
    expect(out.code, out.stderr).toBe(0);
    await refusedEverywhere([c.t1, c.t2], Date.now());
    // The user's own token is not the machine client's: it stays valid.
    expect(await atFirst(c.subject)).toBe(200);
  });

  it('revoke-user revokes the exchanged tokens with the user’s own', async () => {
    const c = await chain();
    const out = await admin(['revoke-user', '--email', c.user.email]);
    expect(out.code, out.stderr).toBe(0);
    await refusedEverywhere([c.subject, c.t1, c.t2], Date.now());
  });

  it('a revocation committed while an exchange is under way: the exchange is refused, no live token left', async () => {
    const user = await seedUser(stack.db.pool);
    const subject = await userToken(user);
    const clientId = await addClient(['platform'], true);
    // Hold the exchange between its checks and its commit: its audit INSERT waits for this table lock.
    const holder = await stack.db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE platform.issuance_audit IN SHARE MODE');
      const pending = exchange(clientId, subject);
      await lockWaiters(stack.db.pool, 1);
      // The subject token is revoked and its cascade runs (finding nothing yet) while the exchange waits.
      const r = await postForm(`${issuer}/oauth/revoke`, { token: subject, client_id: 'platform-cli' });
      expect(r.status).toBe(200);
      await holder.query('COMMIT');
      const t = await pending;
      expect({ status: t.status, error: t.json.error }).toEqual({ status: 400, error: 'invalid_grant' });
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
    }
    // What the exchange recorded is denied too: no token of the user's chain is live at any gateway.
    const { rows } = await stack.db.pool.query<{ jti: string; denied: boolean }>(
      `SELECT a.jti::text, EXISTS (SELECT 1 FROM platform.revocations v WHERE v.kind = 'jti' AND v.value = a.jti::text) AS denied
         FROM platform.issuance_audit a WHERE a.client_id = $1`,
      [clientId],
    );
    expect(rows.length).toBe(1);
    expect(rows[0]!.denied).toBe(true);
  });

  it('revoking a sign-in (its refresh token) revokes the tokens exchanged from its access tokens', async () => {
    const user = await seedUser(stack.db.pool);
    const signedIn = await signIn(issuer, user.sessionToken, { scope: 'openid mcp:platform' });
    const clientId = await addClient(['platform'], true);
    const t = String((await exchange(clientId, signedIn.access_token)).json.access_token);
    expect(await atSecond(t)).toBe(200);
    const r = await postForm(`${issuer}/oauth/revoke`, {
      token: signedIn.refresh_token,
      client_id: 'platform-cli',
    });
    expect(r.status).toBe(200);
    await refusedEverywhere([signedIn.access_token, t], Date.now());
  });
});
