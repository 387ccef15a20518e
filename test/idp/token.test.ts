// POST /oauth/token: single-use codes, PKCE, rotation, reuse detection, the retry window and the claims.
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { exchangeCode, obtainCode, pkcePair, postForm, refresh, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;

beforeAll(async () => {
  db = await createTestDatabase();
  idp = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl') });
  user = await seedUser(db.pool);
});

afterAll(async () => {
  await idp?.stop();
  await db?.drop();
});

const iss = () => idp.issuer;
const tokenUrl = () => `${idp.issuer}/oauth/token`;

describe('authorization_code grant', () => {
  it('issues exactly the spec claims, RS256 with kid and typ at+jwt, no-store', async () => {
    const c = await obtainCode({ issuer: iss(), sessionToken: user.sessionToken });
    const r = await exchangeCode(iss(), c);
    expect(r.status).toBe(200);
    expect(r.res.headers.get('cache-control')).toBe('no-store');
    expect(Object.keys(r.json).sort()).toEqual(
      ['access_token', 'expires_in', 'id_token', 'refresh_token', 'scope', 'token_type'].sort(),
    );
    expect(r.json.token_type).toBe('Bearer');
    const header = decodeProtectedHeader(r.json.access_token as string);
    expect(header).toEqual({ alg: 'RS256', kid: expect.any(String), typ: 'at+jwt' });
    const { payload } = await jwtVerify(
      r.json.access_token as string,
      createRemoteJWKSet(new URL(`${iss()}/.well-known/jwks.json`)),
      {
        issuer: iss(),
        audience: idp.audience,
      },
    );
    expect(typeof payload.aud).toBe('string');
    expect(payload.exp).toBe(payload.iat! + 3600);
    expect(Math.abs(payload.iat! - Date.now() / 1000)).toBeLessThan(5);
    // The refresh token is opaque, not a JWT, and only its hash is stored.
    const rt = r.json.refresh_token as string;
    expect(rt.split('.').length).toBe(1);
    const { rows } = await db.pool.query('SELECT token_hash FROM platform.refresh_tokens');
    expect(rows.map((x) => x.token_hash)).not.toContain(rt);
    const idt = decodeJwt(r.json.id_token as string);
    expect(idt.aud).toBe('platform-cli');
  });

  it('omits the id_token when openid was not granted', async () => {
    const t = await signIn(iss(), user.sessionToken, { scope: 'mcp:mail' });
    expect(t.id_token).toBeUndefined();
    expect(t.scope).toBe('mcp:mail');
  });

  it('20 concurrent exchanges of one code: exactly one succeeds', async () => {
    const c = await obtainCode({ issuer: iss(), sessionToken: user.sessionToken });
    const results = await Promise.all(Array.from({ length: 20 }, () => exchangeCode(iss(), c)));
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) {
      expect(r.status).toBe(400);
      expect(r.json.error).toBe('invalid_grant');
    }
  });

  it('a replayed code fails and revokes the refresh tokens it issued', async () => {
    const c = await obtainCode({ issuer: iss(), sessionToken: user.sessionToken });
    const first = await exchangeCode(iss(), c);
    expect(first.status).toBe(200);
    const replay = await exchangeCode(iss(), c);
    expect(replay.json.error).toBe('invalid_grant');
    const r = await refresh(iss(), first.json.refresh_token as string);
    expect(r.json.error).toBe('invalid_grant');
  });

  it('an expired code (older than 60 s) is invalid_grant', async () => {
    const c = await obtainCode({ issuer: iss(), sessionToken: user.sessionToken });
    await db.pool.query(
      `UPDATE platform.oauth_codes SET expires_at = now() - interval '1 second' WHERE consumed_at IS NULL`,
    );
    const r = await exchangeCode(iss(), c);
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('invalid_grant');
    expect(r.json.error_description).toMatch(/expired/);
  });

  it('codes are created to live 60 s', async () => {
    await obtainCode({ issuer: iss(), sessionToken: user.sessionToken });
    const { rows } = await db.pool.query(
      'SELECT extract(epoch FROM expires_at - created_at)::int AS ttl FROM platform.oauth_codes ORDER BY created_at DESC LIMIT 1',
    );
    expect(rows[0].ttl).toBe(60);
  });

  const bad: Array<
    [
      string,
      (c: Awaited<ReturnType<typeof obtainCode>>) => Record<string, string | undefined>,
      number,
      string,
    ]
  > = [
    ['wrong verifier', (c) => ({ ...form(c), code_verifier: pkcePair().verifier }), 400, 'invalid_grant'],
    ['verifier missing', (c) => ({ ...form(c), code_verifier: undefined }), 400, 'invalid_request'],
    ['verifier too short', (c) => ({ ...form(c), code_verifier: 'abc' }), 400, 'invalid_request'],
    [
      'challenge given as verifier',
      (c) => ({ ...form(c), code_verifier: `${'a'.repeat(43)}` }),
      400,
      'invalid_grant',
    ],
    [
      'redirect_uri differs',
      (c) => ({ ...form(c), redirect_uri: 'http://127.0.0.1:1/callback' }),
      400,
      'invalid_grant',
    ],
    ['redirect_uri missing', (c) => ({ ...form(c), redirect_uri: undefined }), 400, 'invalid_request'],
    ['unknown code', (c) => ({ ...form(c), code: 'nope' }), 400, 'invalid_grant'],
    ['code missing', (c) => ({ ...form(c), code: undefined }), 400, 'invalid_request'],
    ['client_id missing', (c) => ({ ...form(c), client_id: undefined }), 400, 'invalid_request'],
    ['unknown client', (c) => ({ ...form(c), client_id: 'ghost' }), 401, 'invalid_client'],
    ['client secret sent', (c) => ({ ...form(c), client_secret: 's3cret' }), 401, 'invalid_client'],
    ['grant_type missing', (c) => ({ ...form(c), grant_type: undefined }), 400, 'invalid_request'],
    ['grant_type password', (c) => ({ ...form(c), grant_type: 'password' }), 400, 'unsupported_grant_type'],
    [
      // Supported for machine clients only (RFC 6749 §5.2: this client may not use it).
      'grant_type client_credentials by a client that is not a machine client',
      (c) => ({ ...form(c), grant_type: 'client_credentials' }),
      400,
      'unauthorized_client',
    ],
    [
      'resource unknown',
      (c) => ({ ...form(c), resource: 'https://x.example/payroll/mcp' }),
      400,
      'invalid_target',
    ],
  ];
  for (const [name, make, status, error] of bad) {
    it(`${name} → ${status} ${error}`, async () => {
      const c = await obtainCode({ issuer: iss(), sessionToken: user.sessionToken });
      const r = await postForm(tokenUrl(), make(c));
      expect(r.status).toBe(status);
      expect(r.json.error).toBe(error);
      expect(typeof r.json.error_description).toBe('string');
      expect(r.json.access_token).toBeUndefined();
      if (status === 401) expect(r.res.headers.get('www-authenticate')).toBeTruthy();
    });
  }

  it('a code issued to one client cannot be redeemed by another', async () => {
    const reg = await fetch(`${iss()}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: ['http://127.0.0.1:53682/callback'] }),
    });
    const other = ((await reg.json()) as { client_id: string }).client_id;
    const c = await obtainCode({ issuer: iss(), sessionToken: user.sessionToken });
    const r = await postForm(tokenUrl(), { ...form(c), client_id: other });
    expect(r.json.error).toBe('invalid_grant');
  });
});

function form(c: { code: string; verifier: string; redirectUri: string; clientId: string }) {
  return {
    grant_type: 'authorization_code',
    code: c.code,
    code_verifier: c.verifier,
    redirect_uri: c.redirectUri,
    client_id: c.clientId,
  } as Record<string, string | undefined>;
}

describe('refresh_token grant', () => {
  it('rotates: a new opaque token each time, the old one retired (rotatedTo set)', async () => {
    const t = await signIn(iss(), user.sessionToken);
    const r1 = await refresh(iss(), t.refresh_token);
    expect(r1.status).toBe(200);
    expect(r1.res.headers.get('cache-control')).toBe('no-store');
    expect(r1.json.refresh_token).not.toBe(t.refresh_token);
    expect(r1.json.expires_in).toBe(3600);
    expect(r1.json.scope).toBe(t.scope);
    const r2 = await refresh(iss(), r1.json.refresh_token as string);
    expect(r2.status).toBe(200);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n, count(rotated_to)::int AS rotated, min(extract(epoch FROM expires_at - created_at))::int AS ttl
         FROM platform.refresh_tokens WHERE family_id = (SELECT family_id FROM platform.refresh_tokens ORDER BY created_at DESC LIMIT 1)`,
    );
    expect(rows[0]).toEqual({ n: 3, rotated: 2, ttl: 30 * 24 * 3600 });
  });

  it('a rotated-out token presented again after the retry window (60 s) revokes the whole family', async () => {
    const t = await signIn(iss(), user.sessionToken);
    const r1 = await refresh(iss(), t.refresh_token);
    await db.pool.query(
      `UPDATE platform.refresh_tokens SET rotated_at = now() - interval '61 seconds' WHERE rotated_at IS NOT NULL`,
    );
    const reuse = await refresh(iss(), t.refresh_token);
    expect(reuse.status).toBe(400);
    expect(reuse.json.error).toBe('invalid_grant');
    // The legitimate holder's successor is now dead too: the family is revoked.
    const after = await refresh(iss(), r1.json.refresh_token as string);
    expect(after.json.error).toBe('invalid_grant');
  });

  it('within the window a repeat is a sibling: a new pair, and the first successor stays alive', async () => {
    const t = await signIn(iss(), user.sessionToken);
    const r1 = await refresh(iss(), t.refresh_token);
    const again = await refresh(iss(), t.refresh_token);
    expect(again.status).toBe(200);
    expect(again.json.refresh_token).not.toBe(r1.json.refresh_token);
    expect((await refresh(iss(), r1.json.refresh_token as string)).status).toBe(200);
    expect((await refresh(iss(), again.json.refresh_token as string)).status).toBe(200);
  });

  it('within the window, even after the first successor was used, a repeat is a sibling, not reuse', async () => {
    const t = await signIn(iss(), user.sessionToken);
    const r1 = await refresh(iss(), t.refresh_token);
    const r2 = await refresh(iss(), r1.json.refresh_token as string);
    expect(r2.status).toBe(200);
    const sibling = await refresh(iss(), t.refresh_token);
    expect(sibling.status).toBe(200);
    expect((await refresh(iss(), r2.json.refresh_token as string)).status).toBe(200);
    expect((await refresh(iss(), sibling.json.refresh_token as string)).status).toBe(200);
  });

  it('one token is rotated into at most 8 successors; the 9th presentation is reuse', async () => {
    const t = await signIn(iss(), user.sessionToken);
    for (let i = 0; i < 8; i++) expect((await refresh(iss(), t.refresh_token)).status).toBe(200);
    const ninth = await refresh(iss(), t.refresh_token);
    expect(ninth.json.error).toBe('invalid_grant');
    const { rows } = await db.pool.query(
      `SELECT f.revoked_reason, r.rotations FROM platform.refresh_families f
         JOIN platform.refresh_tokens r ON r.family_id = f.id AND r.rotated_from IS NULL
        WHERE f.id = (SELECT family_id FROM platform.refresh_tokens ORDER BY created_at DESC LIMIT 1)`,
    );
    expect(rows).toEqual([{ revoked_reason: 'reuse detected', rotations: 8 }]);
  });

  it('two racing refreshes of one token both get a pair, and both pairs stay alive', async () => {
    const t = await signIn(iss(), user.sessionToken);
    const [a, b] = await Promise.all([refresh(iss(), t.refresh_token), refresh(iss(), t.refresh_token)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const results = await Promise.all([
      refresh(iss(), a.json.refresh_token as string),
      refresh(iss(), b.json.refresh_token as string),
    ]);
    expect(results.map((r) => r.status)).toEqual([200, 200]);
  });

  it('a token presented by another client is invalid_grant', async () => {
    const reg = await fetch(`${iss()}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: ['http://127.0.0.1:53682/callback'] }),
    });
    const other = ((await reg.json()) as { client_id: string }).client_id;
    const t = await signIn(iss(), user.sessionToken);
    expect((await refresh(iss(), t.refresh_token, other)).json.error).toBe('invalid_grant');
    expect((await refresh(iss(), t.refresh_token)).status).toBe(200);
  });

  it('an expired refresh token (30 days) is invalid_grant', async () => {
    const t = await signIn(iss(), user.sessionToken);
    await db.pool.query(
      `UPDATE platform.refresh_tokens SET expires_at = now() - interval '1 second' WHERE rotated_to IS NULL`,
    );
    expect((await refresh(iss(), t.refresh_token)).json.error).toBe('invalid_grant');
  });

  it('a narrower scope may be asked for; a scope the grant lacks is dropped, never added', async () => {
    const t = await signIn(iss(), user.sessionToken, { scope: 'openid email mcp:mail' });
    // Gemini CLI asks again on refresh for every scope it asked for at authorize.
    const wide = await refresh(iss(), t.refresh_token, 'platform-cli', {
      scope: 'openid email mcp:mail mcp:deals',
    });
    expect(wide.status, wide.text).toBe(200);
    expect(wide.json.scope).toBe('openid email mcp:mail');
    expect(decodeJwt(wide.json.access_token as string).scope).toBe('openid email mcp:mail');
    const outside = await refresh(iss(), wide.json.refresh_token as string, 'platform-cli', {
      scope: 'mcp:deals',
    });
    expect(outside.status, outside.text).toBe(200);
    expect(decodeJwt(outside.json.access_token as string).scope).toBe('openid email mcp:mail');
    const narrow = await refresh(iss(), outside.json.refresh_token as string, 'platform-cli', {
      scope: 'mcp:mail',
    });
    expect(narrow.status).toBe(200);
    expect(narrow.json.scope).toBe('mcp:mail');
    expect(decodeJwt(narrow.json.access_token as string).scope).toBe('mcp:mail');
    expect(narrow.json.id_token).toBeUndefined();
  });

  it('a deleted user can no longer refresh', async () => {
    const doomed = await seedUser(db.pool);
    const t = await signIn(iss(), doomed.sessionToken);
    await db.pool.query('DELETE FROM users WHERE id = $1', [doomed.id]);
    expect((await refresh(iss(), t.refresh_token)).json.error).toBe('invalid_grant');
  });

  it('missing or garbage refresh tokens are invalid_request / invalid_grant', async () => {
    expect(
      (await postForm(tokenUrl(), { grant_type: 'refresh_token', client_id: 'platform-cli' })).json.error,
    ).toBe('invalid_request');
    expect((await refresh(iss(), 'garbage')).json.error).toBe('invalid_grant');
    expect((await refresh(iss(), 'x'.repeat(10_000))).json.error).toBe('invalid_grant');
  });
});

describe('issuance audit', () => {
  it('appends who, when, client, scope and jti for every code exchange and refresh', async () => {
    const u = await seedUser(db.pool);
    const t = await signIn(iss(), u.sessionToken, { scope: 'openid mcp:deals' });
    const r = await refresh(iss(), t.refresh_token);
    const { rows } = await db.pool.query(
      'SELECT jti::text, grant_type, subject, email, client_id, scope, issued_at, expires_at FROM platform.issuance_audit WHERE email = $1 ORDER BY id',
      [u.email],
    );
    expect(rows.map((x) => x.grant_type)).toEqual(['authorization_code', 'refresh_token']);
    expect(rows.map((x) => x.jti)).toEqual([
      decodeJwt(t.access_token).jti,
      decodeJwt(r.json.access_token as string).jti,
    ]);
    for (const row of rows) {
      expect(row).toMatchObject({
        subject: u.sub,
        email: u.email,
        client_id: 'platform-cli',
        scope: 'openid mcp:deals',
      });
      expect((row.expires_at.getTime() - row.issued_at.getTime()) / 1000).toBe(3600);
    }
  });

  it('cannot be updated, deleted or truncated through the database', async () => {
    await expect(db.pool.query(`UPDATE platform.issuance_audit SET email = 'x@y'`)).rejects.toThrow(
      /append-only/,
    );
    await expect(db.pool.query('DELETE FROM platform.issuance_audit')).rejects.toThrow(/append-only/);
    await expect(db.pool.query('TRUNCATE platform.issuance_audit')).rejects.toThrow(/append-only/);
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM platform.issuance_audit');
    expect(rows[0].n).toBeGreaterThan(0);
  });
});
