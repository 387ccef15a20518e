// Redirect URIs (RFC 8252 §7.3, §8.3) with the exact forms real MCP clients register, each taken through the
// whole flow (register → authorize on another port → consent approved → token), and the changes that must
// never match: another path, another query, userinfo, a fragment, another loopback host.
import { describe, expect, it } from 'vitest';
import { isLoopbackRedirect, redirectUriMatches, redirectUriProblem } from '../../idp/redirect-uris.ts';
import { registerClient } from '../helpers/clients.ts';
import { idpWithUser } from '../helpers/idp-with-user.ts';
import { authorizeRequest, exchangeCode } from '../helpers/oauth.ts';

const CURSOR = 'cursor://anysphere.cursor-retrieval/oauth/user-platform/callback';
const CONNECTOR = 'https://claude.ai/api/mcp/auth_callback';

const f = idpWithUser({ PLATFORM_ALLOWED_REDIRECT_URIS: `${CURSOR},${CONNECTOR}` });

/** Register with `registered`, authorize with `used`, approve consent, exchange the code. */
async function fullFlow(o: { name: string; registered: string; used: string; applicationType?: string }) {
  const reg = await registerClient(f.idp.url, {
    client_name: o.name,
    redirect_uris: [o.registered],
    ...(o.applicationType ? { application_type: o.applicationType } : {}),
  });
  expect(reg.status, JSON.stringify(reg.json)).toBe(201);
  const clientId = reg.json.client_id;
  const r = await authorizeRequest({
    issuer: f.idp.issuer,
    sessionToken: f.user.sessionToken,
    consent: 'approve',
    params: { client_id: clientId, redirect_uri: o.used, scope: 'openid mcp:platform' },
  });
  expect(r.consentShown).toBe(true);
  expect(r.status, r.body).toBe(302);
  expect(r.location!.href.startsWith(o.used)).toBe(true);
  const code = r.location!.searchParams.get('code')!;
  const t = await exchangeCode(f.idp.url, { code, verifier: r.verifier, redirectUri: o.used, clientId });
  expect(t.status, t.text).toBe(200);
  expect(t.json.access_token).toBeTruthy();
  return clientId;
}

async function refusedAt(clientId: string, used: string) {
  const r = await authorizeRequest({
    issuer: f.idp.issuer,
    sessionToken: f.user.sessionToken,
    params: { client_id: clientId, redirect_uri: used },
  });
  expect(r.status, used).toBe(400);
  expect(r.location, used).toBeUndefined();
  expect(r.body).toContain('redirect_uri is not registered');
}

describe('the forms MCP clients use, through the whole flow', () => {
  it('MCP Inspector: http://127.0.0.1:6276/oauth/callback, any port; path, query, userinfo, fragment refused', async () => {
    const id = await fullFlow({
      name: 'MCP Inspector',
      registered: 'http://127.0.0.1:6276/oauth/callback',
      used: 'http://127.0.0.1:51234/oauth/callback',
    });
    for (const bad of [
      'http://127.0.0.1:6276/oauth/callback/',
      'http://127.0.0.1:6276/oauth/other',
      'http://127.0.0.1:6276/oauth/./callback',
      'http://127.0.0.1:6276/oauth/callback?x=1',
      'http://127.0.0.1:6276/oauth/callback#x',
      'http://user@127.0.0.1:6276/oauth/callback',
      'http://127.0.0.1:6276@evil.example/oauth/callback',
      'http://localhost:6276/oauth/callback',
      'http://[::1]:6276/oauth/callback',
      'https://127.0.0.1:6276/oauth/callback',
      'http://127.0.0.2:6276/oauth/callback',
    ])
      await refusedAt(id, bad);
  });

  it('VS Code: http://127.0.0.1:33418/ (root path), any port', async () => {
    const id = await fullFlow({
      name: 'Visual Studio Code',
      registered: 'http://127.0.0.1:33418/',
      used: 'http://127.0.0.1:40001/',
    });
    await refusedAt(id, 'http://127.0.0.1:40001/callback');
  });

  it('Claude Code: http://localhost:<port>/callback', async () => {
    const id = await fullFlow({
      name: 'Claude Code',
      registered: 'http://localhost:54545/callback',
      used: 'http://localhost:61111/callback',
    });
    await refusedAt(id, 'http://127.0.0.1:61111/callback');
  });

  it('an IPv6 loopback: http://[::1]:<port>/<path>', async () => {
    await fullFlow({ name: 'v6', registered: 'http://[::1]:7000/cb', used: 'http://[::1]:7001/cb' });
  });

  it('a registered query must be given exactly', async () => {
    const id = await fullFlow({
      name: 'q',
      registered: 'http://127.0.0.1:7000/cb?tenant=a',
      used: 'http://127.0.0.1:7002/cb?tenant=a',
    });
    await refusedAt(id, 'http://127.0.0.1:7002/cb?tenant=b');
    await refusedAt(id, 'http://127.0.0.1:7002/cb');
  });

  it('Cursor: its private-use scheme callback, allowlisted, exact', async () => {
    const id = await fullFlow({ name: 'Cursor', registered: CURSOR, used: CURSOR });
    await refusedAt(id, `${CURSOR}/x`);
    await refusedAt(id, `${CURSOR}#x`);
    await refusedAt(id, CURSOR.replace('cursor://', 'cursor://u@'));
  });

  it('a web connector: allowlisted https callback with application_type web', async () => {
    const id = await fullFlow({
      name: 'Connector',
      registered: CONNECTOR,
      used: CONNECTOR,
      applicationType: 'web',
    });
    await refusedAt(id, `${CONNECTOR}?x=1`);
  });
});

describe('application_type never refuses an allowed URI (issue 18); what is not allowed stays refused', () => {
  const accepted: Array<[string, Record<string, unknown>]> = [
    ['native: an allowlisted https callback', { application_type: 'native', redirect_uris: [CONNECTOR] }],
    ['web: a loopback URI', { application_type: 'web', redirect_uris: ['http://127.0.0.1:1/cb'] }],
    ['web: an allowlisted private-use scheme', { application_type: 'web', redirect_uris: [CURSOR] }],
  ];
  for (const [name, body] of accepted) {
    it(`${name} → 201`, async () => {
      const r = await registerClient(f.idp.url, body);
      expect(r.status, JSON.stringify(r.json)).toBe(201);
      expect(r.json.application_type).toBe(body.application_type);
    });
  }

  const cases: Array<[string, Record<string, unknown>, string]> = [
    [
      'native: a private-use scheme not on the allowlist',
      { redirect_uris: ['cursor://other/cb'] },
      'invalid_redirect_uri',
    ],
    [
      'native: http on a non-loopback host',
      { redirect_uris: ['http://example.com/cb'] },
      'invalid_redirect_uri',
    ],
    [
      'native: loopback with userinfo',
      { redirect_uris: ['http://u@127.0.0.1:1/cb'] },
      'invalid_redirect_uri',
    ],
    [
      'native: loopback with a fragment',
      { redirect_uris: ['http://127.0.0.1:1/cb#f'] },
      'invalid_redirect_uri',
    ],
    ['native: javascript:', { redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
    [
      'web: https not on the allowlist',
      { application_type: 'web', redirect_uris: ['https://evil.example/cb'] },
      'invalid_redirect_uri',
    ],
    [
      'an unknown application_type',
      { application_type: 'desktop', redirect_uris: ['http://127.0.0.1:1/cb'] },
      'invalid_client_metadata',
    ],
    [
      'application_type not a string',
      { application_type: 1, redirect_uris: ['http://127.0.0.1:1/cb'] },
      'invalid_client_metadata',
    ],
  ];
  for (const [name, body, error] of cases) {
    it(`${name} → 400 ${error}`, async () => {
      const r = await registerClient(f.idp.url, body);
      expect(r.status).toBe(400);
      expect(r.json.error).toBe(error);
      expect(typeof r.json.error_description).toBe('string');
    });
  }
});

describe('the matching rules, as functions', () => {
  it('compares loopback URIs as written: no normalisation can make two strings equal', () => {
    const reg = ['http://127.0.0.1:6276/oauth/callback'];
    expect(redirectUriMatches(reg, 'http://127.0.0.1/oauth/callback')).toBe(true);
    expect(redirectUriMatches(reg, 'http://127.0.0.1:1/oauth/callback')).toBe(true);
    for (const bad of [
      'http://127.0.0.1:1/oauth/%63allback',
      'http://127.0.0.1:1/OAUTH/callback',
      'http://127.0.0.1:1/oauth/callback/../callback',
      'HTTP://127.0.0.1:1/oauth/callback',
      'http://127.0.0.1:99999/oauth/callback',
      'http://127.0.0.1:1\\@evil.example/oauth/callback',
    ])
      expect(redirectUriMatches(reg, bad), bad).toBe(false);
    expect(isLoopbackRedirect('http://localhost:3000')).toBe(true);
    expect(redirectUriProblem('http://127.0.0.1:1/any/path?x=1', { allowed: [] })).toBeNull();
  });
});
