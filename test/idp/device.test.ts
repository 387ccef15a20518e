// The device authorization grant (RFC 8628) over HTTP against a real `platform idp`: the endpoint, the
// verification page with the web session and its CSRF-bound form, and every polling answer.
import { createHash } from 'node:crypto';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import {
  answerDevicePage,
  type DeviceStart,
  DEVICE_GRANT as GRANT,
  pollDevice,
  skipPollInterval,
} from '../helpers/device.ts';
import { answerConsent, postForm, refresh } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const USER_CODE = /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/;
const COOKIE = 'authjs.session-token';

let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;
let other: SeededUser;

beforeAll(async () => {
  db = await createTestDatabase();
  idp = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl') });
  [user, other] = await Promise.all([seedUser(db.pool), seedUser(db.pool)]);
});

afterAll(async () => {
  await idp?.stop();
  await db?.drop();
});

async function start(form: Record<string, string> = {}): Promise<DeviceStart> {
  const r = await postForm(`${idp.issuer}/oauth/device_authorization`, {
    client_id: 'platform-cli',
    scope: 'openid email mcp:platform',
    ...form,
  });
  expect(r.status, r.text).toBe(200);
  expect(r.res.headers.get('cache-control')).toBe('no-store');
  return r.json as unknown as DeviceStart;
}

const poll = (deviceCode: string, clientId = 'platform-cli') => pollDevice(idp.issuer, deviceCode, clientId);
const sinceLastPoll = (deviceCode: string) => skipPollInterval(db.pool, deviceCode);
const hashOf = (code: string) => createHash('sha256').update(code).digest('base64url');

async function page(url: string, sessionToken?: string) {
  const res = await fetch(url, {
    redirect: 'manual',
    headers: sessionToken ? { cookie: `${COOKIE}=${sessionToken}` } : {},
  });
  return { res, status: res.status, body: await res.text(), location: res.headers.get('location') };
}

async function decide(d: DeviceStart, decision: 'approve' | 'deny', who = user) {
  return answerDevicePage(idp.issuer, d, who.sessionToken, decision);
}

describe('POST /oauth/device_authorization', () => {
  it('answers the RFC 8628 fields; discovery names the endpoint and the grant', async () => {
    const d = await start();
    expect(d.user_code).toMatch(USER_CODE);
    expect(d.verification_uri).toBe(`${idp.issuer}/oauth/device`);
    expect(d.verification_uri_complete).toBe(`${idp.issuer}/oauth/device?user_code=${d.user_code}`);
    expect(d.expires_in).toBe(600);
    expect(d.interval).toBe(5);
    expect(d.device_code.length).toBeGreaterThanOrEqual(43);
    const meta = (await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).json()) as Record<
      string,
      unknown
    >;
    expect(meta.device_authorization_endpoint).toBe(`${idp.issuer}/oauth/device_authorization`);
    expect(meta.grant_types_supported).toContain(GRANT);
    expect(meta.client_id_metadata_document_supported).toBe(true);
  });

  it('stores both codes only as hashes', async () => {
    const d = await start();
    const { rows } = await db.pool.query(`SELECT * FROM platform.device_codes`);
    const text = JSON.stringify(rows);
    expect(text).not.toContain(d.device_code);
    expect(text).not.toContain(d.user_code);
    expect(text).not.toContain(d.user_code.replace('-', ''));
  });

  it('refuses an unknown client, a secret and a missing client_id; drops an unknown scope', async () => {
    const url = `${idp.issuer}/oauth/device_authorization`;
    const unknown = await postForm(url, { client_id: 'nobody' });
    expect([unknown.status, unknown.json.error]).toEqual([401, 'invalid_client']);
    const secret = await postForm(url, { client_id: 'platform-cli', client_secret: 'x' });
    expect([secret.status, secret.json.error]).toEqual([401, 'invalid_client']);
    // An unknown scope is dropped, never invalid_scope (issue 18).
    const scope = await postForm(url, { client_id: 'platform-cli', scope: 'mcp:nope' });
    expect(scope.status).toBe(200);
    const missing = await postForm(url, {});
    expect([missing.status, missing.json.error]).toEqual([400, 'invalid_request']);
  });
});

describe('polling the token endpoint', () => {
  it('pending, then slow_down when faster than the interval (which grows by 5 s), then the tokens once', async () => {
    const d = await start();
    const first = await poll(d.device_code);
    expect([first.status, first.json.error]).toEqual([400, 'authorization_pending']);
    const fast = await poll(d.device_code);
    expect([fast.status, fast.json.error]).toEqual([400, 'slow_down']);
    expect(fast.json.error_description).toMatch(/wait 10 s/);
    const faster = await poll(d.device_code);
    expect(faster.json.error_description).toMatch(/wait 15 s/);

    const decided = await decide(d, 'approve');
    expect(decided.status, decided.body).toBe(200);
    expect(decided.body).toContain('Device connected');

    await sinceLastPoll(d.device_code);
    const ok = await poll(d.device_code);
    expect(ok.status, ok.text).toBe(200);
    const claims = decodeJwt(ok.json.access_token as string);
    expect(claims).toMatchObject({ sub: user.sub, email: user.email, client_id: 'platform-cli' });
    expect(ok.json.scope).toBe('openid email mcp:platform');
    expect(ok.json.id_token).toBeTypeOf('string');
    const audit = await db.pool.query(
      `SELECT grant_type, client_id FROM platform.issuance_audit WHERE jti = $1`,
      [claims.jti],
    );
    expect(audit.rows).toEqual([{ grant_type: GRANT, client_id: 'platform-cli' }]);

    // The refresh token works until the device code is presented again.
    const r1 = await refresh(idp.issuer, ok.json.refresh_token as string);
    expect(r1.status).toBe(200);
    await sinceLastPoll(d.device_code);
    const reused = await poll(d.device_code);
    expect([reused.status, reused.json.error]).toEqual([400, 'invalid_grant']);
    expect(reused.json.error_description).toMatch(/already used/);
    const r2 = await refresh(idp.issuer, r1.json.refresh_token as string);
    expect([r2.status, r2.json.error]).toEqual([400, 'invalid_grant']);
  });

  it('access_denied after the user denies', async () => {
    const d = await start();
    const decided = await decide(d, 'deny');
    expect(decided.body).toContain('Request denied');
    const r = await poll(d.device_code);
    expect([r.status, r.json.error]).toEqual([400, 'access_denied']);
  });

  it('expired_token after expiry; the page refuses the code too', async () => {
    const d = await start();
    await db.pool.query(
      `UPDATE platform.device_codes SET expires_at = now() - interval '1 second' WHERE device_code_hash = $1`,
      [hashOf(d.device_code)],
    );
    const r = await poll(d.device_code);
    expect([r.status, r.json.error]).toEqual([400, 'expired_token']);
    const p = await page(d.verification_uri_complete, user.sessionToken);
    expect(p.status).toBe(400);
    expect(p.body).toContain('That code has expired');
  });

  it('invalid_grant for an unknown code and for another client', async () => {
    const d = await start();
    const unknown = await poll('x'.repeat(43));
    expect(unknown.json.error).toBe('invalid_grant');
    const reg = await fetch(`${idp.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: ['http://127.0.0.1/callback'],
        grant_types: [GRANT, 'refresh_token'],
      }),
    });
    expect(reg.status).toBe(201);
    const { client_id } = (await reg.json()) as { client_id: string };
    const wrong = await poll(d.device_code, client_id);
    expect([wrong.status, wrong.json.error]).toEqual([400, 'invalid_grant']);
  });
});

describe('the verification page', () => {
  it('sends a browser without a session to sign in, coming back with the code', async () => {
    const d = await start();
    const p = await page(d.verification_uri_complete);
    expect(p.status).toBe(302);
    const login = new URL(p.location!);
    expect(login.searchParams.get('callbackUrl')).toBe(d.verification_uri_complete);
  });

  it('asks for the code, accepts it lower-case and without the hyphen, and names client and services', async () => {
    const d = await start({ scope: 'mcp:platform mcp:mail' });
    const entry = await page(`${idp.issuer}/oauth/device`, user.sessionToken);
    expect(entry.status).toBe(200);
    expect(entry.body).toContain('Enter the code your device shows');
    expect(entry.res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    const typed = d.user_code.replace('-', '').toLowerCase();
    const confirm = await page(`${idp.issuer}/oauth/device?user_code=${typed}`, user.sessionToken);
    expect(confirm.status).toBe(200);
    expect(confirm.body).toContain('platform command-line client');
    expect(confirm.body).toContain(d.user_code);
    expect(confirm.body).toContain('mcp:platform');
    expect(confirm.body).toContain('mcp:mail');
    const bad = await page(`${idp.issuer}/oauth/device?user_code=AAAA-AAAA`, user.sessionToken);
    expect(bad.status).toBe(400);
    expect(bad.body).toContain('not a valid code');
    const hostile = await page(
      `${idp.issuer}/oauth/device?user_code=${encodeURIComponent('"><script>alert(1)</script>')}`,
      user.sessionToken,
    );
    expect(hostile.status).toBe(400);
    expect(hostile.body).not.toContain('<script>');
    expect(hostile.body).toContain('&#34;&#62;&#60;script&#62;');
  });

  it('counts code lookups against the device rate limit (guessing codes is slow)', async () => {
    const limited = await startIdpProcess({
      databaseUrl: db.url,
      redisUrl: inject('redisUrl'),
      env: { PLATFORM_RATE_LIMITS: 'device=3/60' },
    });
    try {
      const tries = [];
      for (let i = 0; i < 4; i++)
        tries.push(await page(`${limited.issuer}/oauth/device?user_code=BCDF-GHJK`, user.sessionToken));
      expect(tries.map((t) => t.status)).toEqual([400, 400, 400, 429]);
      expect(tries[3]!.body).toContain('Too many codes were tried from this address');
      expect(Number(tries[3]!.res.headers.get('retry-after'))).toBeGreaterThan(0);
      // The entry form without a code is not a lookup and stays available.
      expect((await page(`${limited.issuer}/oauth/device`, user.sessionToken)).status).toBe(200);
    } finally {
      await limited.stop();
    }
  });

  it("refuses a decision without this session's CSRF token", async () => {
    const d = await start();
    const p = await page(d.verification_uri_complete, user.sessionToken);
    // Another signed-in user replays the form: the token is bound to the session that was shown it.
    const replay = await answerConsent({
      url: d.verification_uri_complete,
      html: p.body,
      sessionToken: other.sessionToken,
      cookieName: COOKIE,
      decision: 'approve',
    });
    expect(replay.status).toBe(403);
    const forged = await answerConsent({
      url: d.verification_uri_complete,
      html: p.body,
      sessionToken: user.sessionToken,
      cookieName: COOKIE,
      decision: 'approve',
      override: { csrf_token: 'forged' },
    });
    expect(forged.status).toBe(403);
    await sinceLastPoll(d.device_code);
    expect((await poll(d.device_code)).json.error).toBe('authorization_pending');
  });
});
