// Scopes and `resource` as real clients send them (issue 18): unknown scopes dropped, offline_access, every
// scope in scopes_supported asked for at once (Gemini CLI), `resource` with or without a trailing slash,
// and a refresh with neither `resource` nor `scope` (Codex).
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { registerClient } from '../helpers/clients.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { exchangeCode, obtainCode, postForm, refresh } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const REDIRECT = 'http://localhost:7777/oauth/callback';
let db: TestDatabase;
let idp: IdpProcess;
let admin: SeededUser;
let clientId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  const adminEmail = `admin-${Date.now()}@example.com`;
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: {
      PLATFORM_ADMIN_EMAILS: adminEmail,
      PLATFORM_SERVICES: 'platform,mail',
      PUBLIC_BASE_URL: 'https://mcp.platform.test',
    },
  });
  admin = await seedUser(db.pool, { email: adminEmail });
  // https://github.com/google-gemini/gemini-cli/blob/main/packages/core/src/mcp/oauth-provider.ts
  const reg = await registerClient(idp.url, {
    client_name: 'Gemini CLI MCP Client',
    redirect_uris: [REDIRECT],
    grant_types: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_method: 'none',
    scope: '',
  });
  clientId = reg.json.client_id;
}, 60_000);

afterAll(async () => {
  await idp?.stop();
  await db?.drop();
});

async function tokens(params: Record<string, string | undefined>) {
  const c = await obtainCode({
    issuer: idp.issuer,
    sessionToken: admin.sessionToken,
    params: { client_id: clientId, redirect_uri: REDIRECT, ...params },
  });
  const t = await exchangeCode(idp.url, c);
  expect(t.status, t.text).toBe(200);
  return t.json as { access_token: string; refresh_token?: string; scope: string };
}

describe('scopes', () => {
  it('offline_access is listed in scopes_supported', async () => {
    const m = (await (await fetch(`${idp.url}/.well-known/openid-configuration`)).json()) as {
      scopes_supported: string[];
    };
    expect(m.scopes_supported).toContain('offline_access');
  });

  it('Gemini CLI: every scope in scopes_supported joined works, without the administrative powers', async () => {
    const m = (await (await fetch(`${idp.url}/.well-known/oauth-authorization-server`)).json()) as {
      scopes_supported: string[];
    };
    expect(m.scopes_supported).toEqual(expect.arrayContaining(['platform:admin', 'mail:send_as']));
    const t = await tokens({ scope: m.scopes_supported.join(' ') });
    const granted = t.scope.split(' ');
    expect(granted).toEqual(expect.arrayContaining(['openid', 'offline_access', 'mcp:platform', 'mcp:mail']));
    // A third-party client gets neither: platform:admin never, mail:send_as only when the consent page named it
    // (issue 17); the consent page here approves what it shows, and the admin's grant still leaves
    // platform:admin out.
    expect(granted).not.toContain('platform:admin');
    expect(decodeJwt(t.access_token).scope).not.toContain('platform:admin');
  });

  it('unknown scopes are dropped, never invalid_scope; the response says what was granted', async () => {
    const t = await tokens({ scope: 'openid mcp:platform repo read:org https://other.example/scope' });
    expect(t.scope).toBe('openid mcp:platform');
  });

  it('Claude: scope " offline_access" alone gets the default services and a refresh token', async () => {
    // https://github.com/anthropics/claude-ai-mcp/issues/96
    const t = await tokens({ scope: ' offline_access', prompt: 'consent' });
    expect(t.scope.split(' ')).toEqual(expect.arrayContaining(['offline_access', 'mcp:platform']));
    expect(t.refresh_token).toBeTruthy();
  });

  it('a refresh token is issued without offline_access too (Zed, OpenCode)', async () => {
    const t = await tokens({ scope: 'openid mcp:platform' });
    expect(t.refresh_token).toBeTruthy();
  });

  it('a refresh with unknown scopes drops them; with an empty or no scope keeps the grant', async () => {
    const t = await tokens({ scope: 'openid mcp:platform mcp:mail' });
    const narrow = await refresh(idp.url, t.refresh_token!, clientId, { scope: 'mcp:mail unknown:scope' });
    expect(narrow.status, narrow.text).toBe(200);
    expect(narrow.json.scope).toBe('mcp:mail');
    const empty = await refresh(idp.url, narrow.json.refresh_token as string, clientId, { scope: '' });
    expect(empty.status, empty.text).toBe(200);
    expect(empty.json.scope).toBe('openid mcp:platform mcp:mail');
  });
});

describe('resource', () => {
  for (const resource of [
    'https://mcp.platform.test/platform/mcp',
    'https://mcp.platform.test/platform/mcp/',
    'https://platform.test/api',
    'https://platform.test/api/',
  ]) {
    it(`${resource} is accepted at authorize and token; a refresh without resource or scope keeps the grant`, async () => {
      const c = await obtainCode({
        issuer: idp.issuer,
        sessionToken: admin.sessionToken,
        params: { client_id: clientId, redirect_uri: REDIRECT, scope: 'openid mcp:platform', resource },
      });
      const t = await postForm(`${idp.url}/oauth/token`, {
        grant_type: 'authorization_code',
        code: c.code,
        code_verifier: c.verifier,
        redirect_uri: REDIRECT,
        client_id: clientId,
        resource,
      });
      expect(t.status, t.text).toBe(200);
      expect(decodeJwt(t.json.access_token as string).aud).toBe(idp.audience);
      // https://github.com/openai/codex/issues/33403: Codex sends no resource on refresh.
      const r = await refresh(idp.url, t.json.refresh_token as string, clientId);
      expect(r.status, r.text).toBe(200);
      expect(r.json.scope).toBe('openid mcp:platform');
      expect(decodeJwt(r.json.access_token as string).aud).toBe(idp.audience);
    });
  }

  it('the same resource twice is one resource (Codex, openai/codex#28830); two different ones are refused', async () => {
    const form = (...resources: string[]) =>
      new URLSearchParams([
        ['grant_type', 'refresh_token'],
        ['refresh_token', 'x'],
        ['client_id', clientId],
        ...resources.map((r): [string, string] => ['resource', r]),
      ]).toString();
    const post = (body: string) =>
      fetch(`${idp.url}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body,
      }).then(async (res) => ({ status: res.status, json: (await res.json()) as Record<string, unknown> }));
    const twice = 'https://mcp.platform.test/platform/mcp';
    // The same value twice gets as far as the grant itself (an unknown refresh token).
    expect(await post(form(twice, twice))).toMatchObject({ status: 400, json: { error: 'invalid_grant' } });
    const different = await post(form(twice, 'https://mcp.platform.test/mail/mcp'));
    expect(different).toMatchObject({ status: 400, json: { error: 'invalid_request' } });
  });

  it('another resource is still invalid_target', async () => {
    const t = await postForm(`${idp.url}/oauth/token`, {
      grant_type: 'refresh_token',
      refresh_token: 'x',
      client_id: clientId,
      resource: 'https://mcp.platform.test/payroll/mcp/',
    });
    expect([t.status, t.json.error]).toEqual([400, 'invalid_target']);
  });
});
