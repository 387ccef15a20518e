// RFC 8707 `resource` as the fourth phase's clients send it (docs/idp.md § Resource indicators): PUBLIC_BASE_URL's
// origin (with or without `/`, as ChatGPT sends it) names the platform as a whole wherever the platform audience
// is accepted; and a resource is bound to its grant: at the token endpoint a code or refresh token is refused
// (400 invalid_target) a resource other than the one its authorization request named, and stays usable for the
// right request (Better Auth GHSA-p2fr-6hmx-4528 honoured the other one).
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { registerClient } from '../helpers/clients.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { answerDevicePage, DEVICE_GRANT, skipPollInterval, startDevice } from '../helpers/device.ts';
import { authorizeRequest, obtainCode, postForm, refresh } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const BASE = 'https://mcp.platform.test';
const REDIRECT = 'http://127.0.0.1:45109/callback';
let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;
let clientId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_SERVICES: 'platform,mail', PUBLIC_BASE_URL: `${BASE}/` },
  });
  user = await seedUser(db.pool);
  const reg = await registerClient(idp.url, { client_name: 'Resource client', redirect_uris: [REDIRECT] });
  clientId = reg.json.client_id;
}, 60_000);

afterAll(async () => {
  await idp?.stop();
  await db?.drop();
});

function code(resource: string | undefined) {
  return obtainCode({
    issuer: idp.issuer,
    sessionToken: user.sessionToken,
    params: { client_id: clientId, redirect_uri: REDIRECT, scope: 'openid mcp:platform mcp:mail', resource },
  });
}

function exchange(c: { code: string; verifier: string }, resource: string | undefined) {
  return postForm(`${idp.url}/oauth/token`, {
    grant_type: 'authorization_code',
    code: c.code,
    code_verifier: c.verifier,
    redirect_uri: REDIRECT,
    client_id: clientId,
    resource,
  });
}

describe("PUBLIC_BASE_URL's origin names the platform", () => {
  for (const resource of [BASE, `${BASE}/`]) {
    it(`${resource} at authorize, token and refresh`, async () => {
      const t = await exchange(await code(resource), resource);
      expect(t.status, t.text).toBe(200);
      expect(decodeJwt(t.json.access_token as string).aud).toBe(idp.audience);
      expect(t.json.scope).toBe('openid mcp:platform mcp:mail');
      const r = await refresh(idp.url, t.json.refresh_token as string, clientId, { resource });
      expect(r.status, r.text).toBe(200);
      expect(decodeJwt(r.json.access_token as string).aud).toBe(idp.audience);
    });
  }

  it('with and without the slash, or the platform audience, it is the same resource', async () => {
    const t = await exchange(await code(BASE), `${BASE}/`);
    expect(t.status, t.text).toBe(200);
    const r = await refresh(idp.url, t.json.refresh_token as string, clientId, { resource: idp.audience });
    expect(r.status, r.text).toBe(200);
  });

  it('anything else on the origin, or another origin, is invalid_target', async () => {
    for (const resource of [`${BASE}/other`, `${BASE}/?x=1`, 'https://elsewhere.example/', `${BASE}/#f`]) {
      const r = await authorizeRequest({
        issuer: idp.issuer,
        sessionToken: user.sessionToken,
        params: { client_id: clientId, redirect_uri: REDIRECT, resource },
      });
      expect(r.location?.searchParams.get('error'), resource).toBe('invalid_target');
    }
  });
});

describe('a resource is bound to its grant', () => {
  it('a code exchanged for another resource: invalid_target, and the code still works for its own', async () => {
    const c = await code(`${BASE}/mail/mcp`);
    for (const other of [`${BASE}/platform/mcp`, BASE, idp.audience]) {
      const refused = await exchange(c, other);
      expect([refused.status, refused.json.error], other).toEqual([400, 'invalid_target']);
    }
    const t = await exchange(c, `${BASE}/mail/mcp/`);
    expect(t.status, t.text).toBe(200);
  });

  it('a refresh for another resource: invalid_target, the refresh token not rotated and still good', async () => {
    const t = await exchange(await code(`${BASE}/mail/mcp`), `${BASE}/mail/mcp`);
    expect(t.status, t.text).toBe(200);
    const token = t.json.refresh_token as string;
    const refused = await refresh(idp.url, token, clientId, { resource: `${BASE}/platform/mcp` });
    expect([refused.status, refused.json.error]).toEqual([400, 'invalid_target']);
    // Not used: presenting it again is no reuse (which would revoke the family), with or without resource.
    const right = await refresh(idp.url, token, clientId, { resource: `${BASE}/mail/mcp` });
    expect(right.status, right.text).toBe(200);
    const next = await refresh(idp.url, right.json.refresh_token as string, clientId);
    expect(next.status, next.text).toBe(200);
    // The successor carries the binding too.
    const again = await refresh(idp.url, next.json.refresh_token as string, clientId, { resource: BASE });
    expect([again.status, again.json.error]).toEqual([400, 'invalid_target']);
  });

  it('a grant whose authorization request named no resource (Claude Code) takes any of the platform', async () => {
    const t = await exchange(await code(undefined), `${BASE}/platform/mcp`);
    expect(t.status, t.text).toBe(200);
    const r = await refresh(idp.url, t.json.refresh_token as string, clientId, { resource: BASE });
    expect(r.status, r.text).toBe(200);
  });

  it('a device code polled for another resource: invalid_target; its own resource gets the tokens, bound too', async () => {
    const d = await startDevice(idp.url, { scope: 'openid mcp:mail', resource: `${BASE}/mail/mcp` });
    const answered = await answerDevicePage(idp.issuer, d, user.sessionToken, 'approve');
    expect(answered.status, answered.body).toBe(200);
    const poll = (resource: string) =>
      postForm(`${idp.url}/oauth/token`, {
        grant_type: DEVICE_GRANT,
        device_code: d.device_code,
        client_id: 'platform-cli',
        resource,
      });
    const refused = await poll(`${BASE}/platform/mcp`);
    expect([refused.status, refused.json.error]).toEqual([400, 'invalid_target']);
    await skipPollInterval(db.pool, d.device_code);
    const t = await poll(`${BASE}/mail/mcp`);
    expect(t.status, t.text).toBe(200);
    const other = await refresh(idp.url, t.json.refresh_token as string, 'platform-cli', { resource: BASE });
    expect([other.status, other.json.error]).toEqual([400, 'invalid_target']);
  });
});
