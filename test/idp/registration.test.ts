// Registration (RFC 7591) as real MCP clients send it, and the client authentication methods it offers
// (client_secret_post, client_secret_basic, private_key_jwt per RFC 7523), each taken through authorize, code
// exchange, refresh, revocation and the device endpoint of a real IdP process.
// Sources of the captured registrations are cited beside each case.
import { exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ASSERTION_TYPE, basicAuth, clientAssertion, registerClient } from '../helpers/clients.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { DEVICE_GRANT, obtainCode, postForm } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from '../helpers/tls.ts';

const CLAUDE = 'https://claude.ai/api/mcp/auth_callback';
const VSCODE = 'https://vscode.dev/redirect';
const VSCODE_INSIDERS = 'https://insiders.vscode.dev/redirect';
const CURSOR = 'cursor://anysphere.cursor-mcp/oauth/callback';
const CURSOR_WEB = 'https://www.cursor.com/agents/mcp/oauth/callback';

let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;
let ca: TestCa;
let jwksServer: TestHttpsServer;
const keys = await generateKeyPair('ES256', { extractable: true });

beforeAll(async () => {
  db = await createTestDatabase();
  ca = await createTestCa();
  const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  jwksServer = await startHttpsServer(ca, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
  });
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: {
      PLATFORM_ALLOWED_REDIRECT_URIS: [CLAUDE, VSCODE, VSCODE_INSIDERS, CURSOR, CURSOR_WEB].join(','),
      PLATFORM_CIMD_ALLOWED_HOSTS: `localhost:${jwksServer.port}`,
      PLATFORM_CIMD_CA_FILE: ca.caFile,
    },
  });
  user = await seedUser(db.pool);
}, 60_000);

afterAll(async () => {
  await idp?.stop();
  await jwksServer?.close();
  await ca?.cleanup();
  await db?.drop();
});

const tokenUrl = () => `${idp.url}/oauth/token`;

async function postWithBasic(url: string, auth: string, form: Record<string, string>) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: auth },
    body: new URLSearchParams(form),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

function hasNoNull(v: unknown): boolean {
  if (v === null) return false;
  if (typeof v !== 'object') return true;
  return Object.values(v as object).every(hasNoNull);
}

describe('the issue 18 registrations, exactly as the clients send them', () => {
  it('Claude.ai: client_secret_post, no application_type, no scope → 201 with a secret, no null members', async () => {
    // https://github.com/PostHog/posthog/pull/48397 (the body), https://github.com/anthropics/claude-code/issues/52565 (nulls)
    const r = await registerClient(idp.url, {
      redirect_uris: [CLAUDE],
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      client_name: 'Claude',
    });
    expect(r.status, JSON.stringify(r.json)).toBe(201);
    expect(r.json.client_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(r.json.client_secret_expires_at).toBe(0);
    expect(r.json.token_endpoint_auth_method).toBe('client_secret_post');
    expect(r.json.application_type).toBe('web');
    expect(hasNoNull(r.json)).toBe(true);
    const { rows } = await db.pool.query(
      'SELECT secret_hash, auth_method, metadata FROM platform.oauth_clients WHERE client_id = $1',
      [r.json.client_id],
    );
    expect(rows[0].auth_method).toBe('client_secret_post');
    expect(rows[0].secret_hash).not.toContain(r.json.client_secret as string);
    expect(JSON.stringify(rows[0])).not.toContain(r.json.client_secret as string);
    expect(rows[0].metadata.application_type).toBe('web');
  });

  it('VS Code: application_type native with two https callbacks and two loopback URIs, device_code grant → 201', async () => {
    // https://github.com/microsoft/vscode/blob/main/src/vs/base/common/oauth.ts
    const r = await registerClient(idp.url, {
      client_name: 'Visual Studio Code',
      client_uri: 'https://code.visualstudio.com',
      grant_types: ['authorization_code', 'refresh_token', DEVICE_GRANT],
      response_types: ['code'],
      redirect_uris: [VSCODE_INSIDERS, VSCODE, 'http://127.0.0.1/', 'http://127.0.0.1:33418/'],
      scope: 'mcp:platform',
      token_endpoint_auth_method: 'none',
      application_type: 'native',
    });
    expect(r.status, JSON.stringify(r.json)).toBe(201);
    expect(r.json.application_type).toBe('native');
    expect(r.json.client_secret).toBeUndefined();
  });

  it('Cursor: application_type web with cursor://, an https cursor.com callback and a loopback URI → 201', async () => {
    // https://github.com/erp-mafia/accounted/pull/2225, https://github.com/elie222/inbox-zero/pull/3780
    const r = await registerClient(idp.url, {
      client_name: 'Cursor',
      redirect_uris: [CURSOR, CURSOR_WEB, 'http://localhost:8787/callback'],
      token_endpoint_auth_method: 'none',
      application_type: 'web',
    });
    expect(r.status, JSON.stringify(r.json)).toBe(201);
  });

  it('Zed: grant_types authorization_code only; Gemini CLI: scope ""; inferred application_type native', async () => {
    // https://github.com/zed-industries/zed/blob/main/crates/context_server/src/oauth.rs
    const zed = await registerClient(idp.url, {
      client_name: 'Zed',
      redirect_uris: ['http://127.0.0.1:27523/callback'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    expect(zed.status, JSON.stringify(zed.json)).toBe(201);
    expect(zed.json.grant_types).toEqual(['authorization_code']);
    expect(zed.json.application_type).toBe('native');
    // https://github.com/google-gemini/gemini-cli/blob/main/packages/core/src/mcp/oauth-provider.ts
    const gemini = await registerClient(idp.url, {
      client_name: 'Gemini CLI MCP Client',
      redirect_uris: ['http://localhost:7777/oauth/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_method: 'none',
      scope: '',
    });
    expect(gemini.status, JSON.stringify(gemini.json)).toBe(201);
  });
});

describe('discovery', () => {
  it('lists the four methods and the assertion signing algorithms', async () => {
    const m = (await (await fetch(`${idp.url}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      string[]
    >;
    expect(m.token_endpoint_auth_methods_supported).toEqual([
      'none',
      'client_secret_post',
      'client_secret_basic',
      'private_key_jwt',
    ]);
    expect(m.token_endpoint_auth_signing_alg_values_supported).toEqual(
      expect.arrayContaining(['RS256', 'ES256', 'EdDSA']),
    );
  });
});

async function codeFor(clientId: string, redirectUri: string) {
  return obtainCode({
    issuer: idp.issuer,
    sessionToken: user.sessionToken,
    params: { client_id: clientId, redirect_uri: redirectUri, scope: 'openid mcp:platform' },
  });
}

describe('confidential clients at the token, revocation and device endpoints', () => {
  it('client_secret_post: code, refresh and revocation with the secret in the body', async () => {
    const reg = await registerClient(idp.url, {
      redirect_uris: [CLAUDE],
      token_endpoint_auth_method: 'client_secret_post',
      client_name: 'Claude',
    });
    const id = reg.json.client_id;
    const secret = reg.json.client_secret as string;
    const c = await codeFor(id, CLAUDE);
    const t = await postForm(tokenUrl(), {
      grant_type: 'authorization_code',
      code: c.code,
      code_verifier: c.verifier,
      redirect_uri: CLAUDE,
      client_id: id,
      client_secret: secret,
    });
    expect(t.status, t.text).toBe(200);
    const r = await postForm(tokenUrl(), {
      grant_type: 'refresh_token',
      refresh_token: t.json.refresh_token as string,
      client_id: id,
      client_secret: secret,
    });
    expect(r.status, r.text).toBe(200);
    const rv = await postForm(`${idp.url}/oauth/revoke`, {
      token: r.json.refresh_token as string,
      client_id: id,
      client_secret: secret,
    });
    expect(rv.status).toBe(200);
    const after = await postForm(tokenUrl(), {
      grant_type: 'refresh_token',
      refresh_token: r.json.refresh_token as string,
      client_id: id,
      client_secret: secret,
    });
    expect(after.json.error).toBe('invalid_grant');
  });

  it('client_secret_basic: code exchange and the device endpoint with Authorization: Basic', async () => {
    const reg = await registerClient(idp.url, {
      redirect_uris: ['http://127.0.0.1:9/cb'],
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['authorization_code', 'refresh_token', DEVICE_GRANT],
    });
    const id = reg.json.client_id;
    const auth = basicAuth(id, reg.json.client_secret as string);
    const c = await codeFor(id, 'http://127.0.0.1:9/cb');
    const t = await postWithBasic(tokenUrl(), auth, {
      grant_type: 'authorization_code',
      code: c.code,
      code_verifier: c.verifier,
      redirect_uri: 'http://127.0.0.1:9/cb',
    });
    expect(t.status, JSON.stringify(t.json)).toBe(200);
    const d = await postWithBasic(`${idp.url}/oauth/device_authorization`, auth, { scope: 'mcp:platform' });
    expect(d.status, JSON.stringify(d.json)).toBe(200);
    expect(d.json.device_code).toBeTruthy();
    const noAuth = await postForm(`${idp.url}/oauth/device_authorization`, { client_id: id });
    expect([noAuth.status, noAuth.json.error]).toEqual([401, 'invalid_client']);
  });

  it('PKCE stays mandatory for a confidential client', async () => {
    const reg = await registerClient(idp.url, {
      redirect_uris: [CLAUDE],
      token_endpoint_auth_method: 'client_secret_post',
    });
    const c = await codeFor(reg.json.client_id, CLAUDE);
    const t = await postForm(tokenUrl(), {
      grant_type: 'authorization_code',
      code: c.code,
      redirect_uri: CLAUDE,
      client_id: reg.json.client_id,
      client_secret: reg.json.client_secret as string,
    });
    expect([t.status, t.json.error]).toEqual([400, 'invalid_request']);
  });

  for (const how of ['jwks', 'jwks_uri'] as const) {
    it(`private_key_jwt with ${how}: the assertion authenticates the code exchange and the refresh`, async () => {
      const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'ES256' };
      const reg = await registerClient(idp.url, {
        redirect_uris: ['http://127.0.0.1:9/cb'],
        token_endpoint_auth_method: 'private_key_jwt',
        ...(how === 'jwks'
          ? { jwks: { keys: [jwk] } }
          : { jwks_uri: `https://localhost:${jwksServer.port}/jwks.json` }),
      });
      expect(reg.status, JSON.stringify(reg.json)).toBe(201);
      expect(reg.json.client_secret).toBeUndefined();
      const id = reg.json.client_id;
      const c = await codeFor(id, 'http://127.0.0.1:9/cb');
      const t = await postForm(tokenUrl(), {
        grant_type: 'authorization_code',
        code: c.code,
        code_verifier: c.verifier,
        redirect_uri: 'http://127.0.0.1:9/cb',
        client_assertion_type: ASSERTION_TYPE,
        client_assertion: await clientAssertion(keys.privateKey, {
          clientId: id,
          aud: idp.issuer,
          kid: 'k1',
        }),
      });
      expect(t.status, t.text).toBe(200);
      const r = await postForm(tokenUrl(), {
        grant_type: 'refresh_token',
        refresh_token: t.json.refresh_token as string,
        client_id: id,
        client_assertion_type: ASSERTION_TYPE,
        client_assertion: await clientAssertion(keys.privateKey, { clientId: id, aud: tokenUrl() }),
      });
      expect(r.status, r.text).toBe(200);
    });
  }
});
