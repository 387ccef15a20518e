// The gateway's token exchange for a user's connection (RFC 8693, resource urn:platform:connection:<name>). The IdP
// runs in-process (startIdp, as `platform dev` starts it) on a real Postgres and Redis, with a small Connections of
// the test's own in place of the connections store (idp/connections/types.ts is the seam): what the exchange asks
// of it, and answers with. Over HTTP: the gateway's client authenticated with HTTP Basic gets the user's upstream
// token; not connected is interaction_required with connect_uri; every other client is refused; a revoked,
// blocked or machine subject is invalid_grant and the store is never asked; each exchange is one audit row; the
// upstream token appears in no log line (trace level), no audit row and no admin answer.
import { createPrivateKey } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadIdpConfig } from '../../idp/config.ts';
import type { ConnectionsService } from '../../idp/connections/service.ts';
import type { Connections, ConnectionUser, UpstreamToken } from '../../idp/connections/types.ts';
import { type RunningIdp, startIdp } from '../../idp/server.ts';
import { type AccessTokenClaims, JwtSigner } from '../../idp/tokens/jwt.ts';
import { fromKeyObject } from '../../idp/tokens/keys.ts';
import { ConfigError } from '../../lib/config.ts';
import { createLogger } from '../../lib/logger.ts';
import { callAdminApi } from '../helpers/admin-api.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { newMachineKey } from '../helpers/machine-clients.ts';
import { postForm, signIn } from '../helpers/oauth.ts';
import { freePort, testSigningKeyPem } from '../helpers/processes.ts';

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
// Base64 characters, as `openssl rand -base64 48` makes them: `+`, `/` and `=` change under form-decoding.
const SECRET = 'connections+gateway/secret=0123456789abcdefghijkl+/==';

/** The connections of the test: `github` and `jira`; a user has an upstream token once the test gives one. */
class TestConnections implements Connections {
  readonly asked: Array<{ user: ConnectionUser; name: string }> = [];
  readonly tokens = new Map<string, UpstreamToken>();
  readonly #issuer: () => string;
  constructor(issuer: () => string) {
    this.#issuer = issuer;
  }
  has(name: string): boolean {
    return name === 'github' || name === 'jira';
  }
  async accessToken(user: ConnectionUser, name: string): Promise<UpstreamToken> {
    this.asked.push({ user, name });
    return (
      this.tokens.get(`${user.userId}:${name}`) ?? {
        ok: false,
        error: 'interaction_required',
        description: `${name} is not connected for this user`,
        connectUri: `${this.#issuer()}/connections/${name}`,
      }
    );
  }
}

let db: TestDatabase;
let idp: RunningIdp;
let issuer: string;
let adminToken: string;
const lines: string[] = [];
const connections = new TestConnections(() => issuer);

const ENV = (over: Record<string, string> = {}) => ({
  IDP_PORT: new URL(issuer).port,
  PLATFORM_OIDC_ISSUER: issuer,
  PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
  PLATFORM_AUDIENCE: 'https://platform.test/api',
  DATABASE_URL: db.url,
  REDIS_URL: inject('redisUrl'),
  PLATFORM_GATEWAY_CLIENT_SECRET: SECRET,
  ...over,
});

beforeAll(async () => {
  db = await createTestDatabase();
  issuer = `http://127.0.0.1:${await freePort()}`;
  const admin = await seedUser(db.pool, {
    email: `conn-admin-${crypto.randomUUID().slice(0, 8)}@example.com`,
  });
  const log = createLogger({
    name: 'idp',
    level: 'trace',
    destination: new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    }),
  });
  idp = await startIdp(loadIdpConfig(ENV({ PLATFORM_ADMIN_EMAILS: admin.email })), {
    log,
    // Only the exchange's seam (idp/connections/types.ts) is reached in this file: no connect page is asked.
    connections: connections as unknown as ConnectionsService,
    host: '127.0.0.1',
  });
  adminToken = (await signIn(issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
}, 60_000);

afterAll(async () => {
  await idp?.close();
  await db?.drop();
});

const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

function exchange(
  subjectToken: string,
  o: { name?: string; auth?: string; form?: Record<string, string> } = {},
) {
  return postForm(
    `${issuer}/oauth/token`,
    {
      grant_type: EXCHANGE,
      subject_token: subjectToken,
      subject_token_type: ACCESS_TOKEN,
      resource: `urn:platform:connection:${o.name ?? 'github'}`,
      ...o.form,
    },
    o.auth === '' ? {} : { authorization: o.auth ?? basic('platform-gateway', SECRET) },
  );
}

async function connectedUser(token: UpstreamToken & { ok: true }, name = 'github') {
  const user = await seedUser(db.pool);
  connections.tokens.set(`${user.id}:${name}`, token);
  return { user, subject: (await signIn(issuer, user.sessionToken)).access_token };
}

const upstreamValue = () => `gho_${crypto.randomUUID().replaceAll('-', '')}`;

describe('token exchange for a connection (the gateway’s client)', () => {
  it('answers the user’s upstream token: issued_token_type, Bearer, expires_in, no-store; one audit row without the token', async () => {
    const upstream = upstreamValue();
    const expiresAt = new Date(Date.now() + 1800_000);
    const { user, subject } = await connectedUser({
      ok: true,
      accessToken: upstream,
      expiresAt,
      scope: 'repo',
    });
    const asked = connections.asked.length;
    const t = await exchange(subject);
    expect(t.status, t.text).toBe(200);
    expect(t.res.headers.get('cache-control')).toBe('no-store');
    expect(t.json).toMatchObject({
      access_token: upstream,
      issued_token_type: ACCESS_TOKEN,
      token_type: 'Bearer',
      scope: 'repo',
    });
    expect(Number(t.json.expires_in)).toBeGreaterThan(1790);
    expect(Number(t.json.expires_in)).toBeLessThanOrEqual(1800);
    expect(t.json.refresh_token).toBeUndefined();
    // The store was asked for this user (users.id and the lowercased email) and this connection.
    expect(connections.asked.slice(asked)).toEqual([
      { user: { userId: String(user.id), email: user.email }, name: 'github' },
    ]);

    const audit = await callAdminApi(
      issuer,
      adminToken,
      'GET',
      `/admin/api/audit?email=${encodeURIComponent(user.email)}`,
    );
    const rows = (audit.json.items as Array<Record<string, unknown>>).filter(
      (i) => i.grant_type === EXCHANGE,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      event: 'issued',
      client_id: 'platform-gateway',
      subject: user.sub,
      detail: { subject_jti: decodeJwt(subject).jti, connection: 'github' },
    });
    for (const path of ['/admin/api/audit', '/admin/api/audit.jsonl', '/admin/api/audit.csv']) {
      const res = await fetch(`${issuer}${path}?email=${encodeURIComponent(user.email)}`, {
        headers: { authorization: `Bearer ${adminToken}` },
      });
      expect(res.status).toBe(200);
      expect(await res.text()).not.toContain(upstream);
    }
    const { rows: stored } = await db.pool.query('SELECT * FROM platform.issuance_audit');
    expect(JSON.stringify(stored)).not.toContain(upstream);
    expect(lines.join('')).not.toContain(upstream);
    expect(lines.some((l) => l.includes('"msg":"connection token exchanged"'))).toBe(true);
  });

  it('an upstream token whose expiry is unknown: expires_in 300 (the gateway asks again then)', async () => {
    const { subject } = await connectedUser({ ok: true, accessToken: upstreamValue() });
    const t = await exchange(subject);
    expect(t.status, t.text).toBe(200);
    expect(t.json.expires_in).toBe(300);
    expect(t.json.scope).toBeUndefined();
  });

  it('not connected: 400 interaction_required with connect_uri', async () => {
    const user = await seedUser(db.pool);
    const subject = (await signIn(issuer, user.sessionToken)).access_token;
    const t = await exchange(subject, { name: 'jira' });
    expect(t.status).toBe(400);
    expect(t.res.headers.get('cache-control')).toBe('no-store');
    expect(t.json).toEqual({
      error: 'interaction_required',
      error_description: 'jira is not connected for this user',
      connect_uri: `${issuer}/connections/jira`,
    });
  });

  it('a connection that is not configured: 400 invalid_target, the store not asked', async () => {
    const { subject } = await connectedUser({ ok: true, accessToken: upstreamValue() });
    const asked = connections.asked.length;
    for (const name of ['gitlab', 'Git Hub', '']) {
      const t = await exchange(subject, { name });
      expect({ name, status: t.status, error: t.json.error }).toEqual({
        name,
        status: 400,
        error: 'invalid_target',
      });
    }
    expect(connections.asked.length).toBe(asked);
  });

  it('a revoked, blocked or expired subject, or a machine client’s token: 400 invalid_grant, the store not asked; unblock restores it', async () => {
    const revoked = await connectedUser({ ok: true, accessToken: upstreamValue() });
    expect((await postForm(`${issuer}/oauth/revoke`, { token: revoked.subject })).status).toBe(200);
    const blocked = await connectedUser({ ok: true, accessToken: upstreamValue() });
    const block = await callAdminApi(issuer, adminToken, 'POST', '/admin/api/block', {
      email: blocked.user.email,
    });
    expect(block.status).toBe(200);
    // Signed by the IdP's own key, the user's and connected, but expired a few seconds ago (within the gateways'
    // 60 s leeway for clocks that differ; the IdP's own clock signed it).
    const expiredFor = await connectedUser({ ok: true, accessToken: upstreamValue() });
    const claims = decodeJwt(expiredFor.subject) as unknown as AccessTokenClaims;
    const key = await fromKeyObject(createPrivateKey(testSigningKeyPem()), undefined);
    const now = Math.floor(Date.now() / 1000);
    const expired = new JwtSigner(key).accessToken({
      ...claims,
      jti: crypto.randomUUID(),
      iat: now - 3605,
      exp: now - 5,
    });
    const asked = connections.asked.length;
    for (const subject of [revoked.subject, blocked.subject, expired, 'not.a.token']) {
      const t = await exchange(subject);
      expect({ status: t.status, error: t.json.error }).toEqual({ status: 400, error: 'invalid_grant' });
    }

    // A machine client's own token names no user: it has no connections.
    const machineKey = await newMachineKey();
    const added = await callAdminApi(issuer, adminToken, 'POST', '/admin/api/clients', {
      name: 'bot',
      jwks: machineKey.jwks,
      email: (await seedUser(db.pool)).email,
      services: ['platform'],
    });
    const machineToken = String(
      (await machineKey.token(issuer, String(added.json.client_id))).json.access_token,
    );
    const m = await exchange(machineToken);
    expect({ status: m.status, error: m.json.error }).toEqual({ status: 400, error: 'invalid_grant' });
    expect(connections.asked.length).toBe(asked);

    // Unblocked, a new sign-in exchanges again: the stored grant was never touched.
    expect(
      (await callAdminApi(issuer, adminToken, 'POST', '/admin/api/unblock', { email: blocked.user.email }))
        .status,
    ).toBe(200);
    // Tokens issued at or before the block's cut-off (whole seconds) stay revoked: sign in after it.
    while (Math.floor(Date.now() / 1000) <= Number(block.json.cutoff))
      await new Promise((r) => setTimeout(r, 50));
    const again = await exchange((await signIn(issuer, blocked.user.sessionToken)).access_token);
    expect(again.status, again.text).toBe(200);
  });

  it('any other client: a public one, a user’s confidential one, a --may-act machine client, a wrong secret, none', async () => {
    const { subject } = await connectedUser({ ok: true, accessToken: upstreamValue() });
    const asked = connections.asked.length;
    const publicClient = await exchange(subject, { auth: '', form: { client_id: 'platform-cli' } });
    expect({ status: publicClient.status, error: publicClient.json.error }).toEqual({
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
    const confidential = await exchange(subject, { auth: basic(client_id, client_secret) });
    expect({ status: confidential.status, error: confidential.json.error }).toEqual({
      status: 400,
      error: 'unauthorized_client',
    });

    const key = await newMachineKey();
    const added = await callAdminApi(issuer, adminToken, 'POST', '/admin/api/clients', {
      name: 'delegate',
      jwks: key.jwks,
      email: (await seedUser(db.pool)).email,
      services: ['platform'],
      may_act: true,
    });
    expect(added.json.may_act).toBe(true);
    const machineId = String(added.json.client_id);
    const machine = await exchange(subject, {
      auth: '',
      form: {
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: await key.assertion(machineId, issuer),
      },
    });
    expect({ status: machine.status, error: machine.json.error }).toEqual({
      status: 400,
      error: 'unauthorized_client',
    });

    // The gateway's secret as sent by a client that does not form-encode it (RFC 6749 §2.3.1 says it should).
    const raw = await exchange(subject, {
      auth: `Basic ${Buffer.from(`platform-gateway:${SECRET}`).toString('base64')}`,
    });
    expect(raw.status, raw.text).toBe(200);
    const wrong = await exchange(subject, { auth: basic('platform-gateway', `${SECRET}x`) });
    expect({ status: wrong.status, error: wrong.json.error }).toEqual({
      status: 401,
      error: 'invalid_client',
    });
    const none = await exchange(subject, { auth: '' });
    expect({ status: none.status, error: none.json.error }).toEqual({ status: 401, error: 'invalid_client' });
    expect(connections.asked.length).toBe(asked + 1);
  });

  it('the gateway’s client is for the exchange only: no other grant, no authorization or device request', async () => {
    const gw = basic('platform-gateway', SECRET);
    const refresh = await postForm(
      `${issuer}/oauth/token`,
      { grant_type: 'refresh_token', refresh_token: 'x' },
      {
        authorization: gw,
      },
    );
    expect(refresh.json.error).toBe('unauthorized_client');
    const cc = await postForm(
      `${issuer}/oauth/token`,
      { grant_type: 'client_credentials' },
      { authorization: gw },
    );
    expect(cc.json.error).toBe('unauthorized_client');
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: 'platform-gateway',
      redirect_uri: 'http://127.0.0.1:9/callback',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
    });
    const page = await fetch(`${issuer}/oauth/authorize?${q}`, { redirect: 'manual' });
    expect(page.status).toBe(400);
    expect(page.headers.get('location')).toBeNull();
    const device = await postForm(
      `${issuer}/oauth/device_authorization`,
      { scope: 'mcp:platform' },
      {
        authorization: gw,
      },
    );
    expect({ status: device.status, error: device.json.error }).toEqual({
      status: 400,
      error: 'unauthorized_client',
    });
  });
});

describe('PLATFORM_GATEWAY_CLIENT_SECRET', () => {
  it('32 characters at least; the _FILE form is read; unset, there is no gateway client', async () => {
    expect(() => loadIdpConfig(ENV({ PLATFORM_GATEWAY_CLIENT_SECRET: 'too-short' }))).toThrow(ConfigError);
    expect(() => loadIdpConfig(ENV({ PLATFORM_GATEWAY_CLIENT_SECRET: 'too-short' }))).toThrow(
      /PLATFORM_GATEWAY_CLIENT_SECRET/,
    );
    const file = join(tmpdir(), `gateway-secret-${crypto.randomUUID()}`);
    await writeFile(file, `${SECRET}\n`);
    const { PLATFORM_GATEWAY_CLIENT_SECRET: _, ...rest } = ENV();
    expect(loadIdpConfig({ ...rest, PLATFORM_GATEWAY_CLIENT_SECRET_FILE: file }).gatewayClientSecret).toBe(
      SECRET,
    );
    expect(loadIdpConfig(rest).gatewayClientSecret).toBeUndefined();
  });

  it('without it, platform-gateway is no client (401 invalid_client)', async () => {
    const other = `http://127.0.0.1:${await freePort()}`;
    const { PLATFORM_GATEWAY_CLIENT_SECRET: _, ...rest } = ENV();
    const without = await startIdp(
      loadIdpConfig({ ...rest, IDP_PORT: new URL(other).port, PLATFORM_OIDC_ISSUER: other }),
      {
        log: createLogger({ name: 'idp', level: 'silent' }),
        // Only the exchange's seam (idp/connections/types.ts) is reached in this file: no connect page is asked.
        connections: connections as unknown as ConnectionsService,
        host: '127.0.0.1',
      },
    );
    try {
      const user: SeededUser = await seedUser(db.pool);
      const subject = (await signIn(other, user.sessionToken)).access_token;
      const t = await postForm(
        `${other}/oauth/token`,
        {
          grant_type: EXCHANGE,
          subject_token: subject,
          subject_token_type: ACCESS_TOKEN,
          resource: 'urn:platform:connection:github',
        },
        { authorization: basic('platform-gateway', SECRET) },
      );
      expect({ status: t.status, error: t.json.error }).toEqual({ status: 401, error: 'invalid_client' });
    } finally {
      await without.close();
    }
  });
});
