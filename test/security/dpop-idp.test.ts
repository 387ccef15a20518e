// DPoP at the IdP, the attacks of issue 20 replayed against real processes: two `platform idp` replicas on one
// database and one Redis (admin tokens only DPoP-bound), and a third with PLATFORM_DPOP_NONCE=on.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { type DpopKey, dpopSignIn, dpopTokenRequest, jwtPayload, newDpopKey } from '../helpers/dpop.ts';
import { CLI, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

let db: TestDatabase;
let user: SeededUser;
let a: IdpProcess;
let b: IdpProcess;
let nonced: IdpProcess;

beforeAll(async () => {
  db = await createTestDatabase();
  user = await seedUser(db.pool);
  const env = { PLATFORM_ADMIN_EMAILS: user.email, PLATFORM_ADMIN_REQUIRE_DPOP: 'on' };
  const redisUrl = inject('redisUrl');
  [a, b, nonced] = await Promise.all([
    startIdpProcess({ databaseUrl: db.url, redisUrl, env }),
    startIdpProcess({ databaseUrl: db.url, redisUrl, env }),
    startIdpProcess({ databaseUrl: db.url, redisUrl, env: { PLATFORM_DPOP_NONCE: 'on' } }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop(), nonced?.stop()]);
  await db?.drop();
});

const refreshForm = (token: string) => ({
  grant_type: 'refresh_token',
  refresh_token: token,
  client_id: CLI,
});

describe('a stolen DPoP-bound refresh token is useless without the key', () => {
  let key: DpopKey;
  beforeAll(async () => {
    key = await newDpopKey();
  });

  it("the current token, without a proof or with the thief's key: invalid_grant; the holder goes on", async () => {
    const t = await dpopSignIn(a.issuer, user.sessionToken, key);
    const thief = await newDpopKey();
    for (const proof of [undefined, thief]) {
      const r = await dpopTokenRequest(a.issuer, refreshForm(t.refresh_token), proof);
      expect(r.status).toBe(400);
      expect(r.json.error).toBe('invalid_grant');
    }
    const mine = await dpopTokenRequest(a.issuer, refreshForm(t.refresh_token), key);
    expect(mine.status).toBe(200);
  });

  it('a rotated-out token replayed inside the retry window without the key: invalid_grant, nothing changes', async () => {
    const t = await dpopSignIn(a.issuer, user.sessionToken, key);
    const rotated = await dpopTokenRequest(a.issuer, refreshForm(t.refresh_token), key);
    expect(rotated.status).toBe(200);
    const before = await familyStateByToken(rotated.json.refresh_token as string);
    const thief = await newDpopKey();
    for (const proof of [undefined, thief]) {
      const r = await dpopTokenRequest(b.issuer, refreshForm(t.refresh_token), proof);
      expect(r.status).toBe(400);
      expect(r.json.error).toBe('invalid_grant');
    }
    // No family revoked, no sibling created: the holder's chain goes on.
    expect(await familyStateByToken(rotated.json.refresh_token as string)).toEqual(before);
    expect(before).toEqual({ tokens: '2', revoked: false });
    const next = await dpopTokenRequest(a.issuer, refreshForm(rotated.json.refresh_token as string), key);
    expect(next.status).toBe(200);
  });
});

/** The family of a refresh token (found by the IdP's hash of it): how many tokens, whether it is revoked. */
async function familyStateByToken(refreshToken: string) {
  const hash = createHash('sha256').update(refreshToken).digest('base64url');
  const { rows } = await db.pool.query<{ tokens: string; revoked: boolean }>(
    `SELECT (SELECT count(*) FROM platform.refresh_tokens t WHERE t.family_id = f.id)::text AS tokens,
            f.revoked_at IS NOT NULL AS revoked
       FROM platform.refresh_families f
      WHERE f.id = (SELECT family_id FROM platform.refresh_tokens WHERE token_hash = $1)`,
    [hash],
  );
  return rows[0];
}

describe('proofs the token endpoint refuses (400 invalid_dpop_proof)', () => {
  async function boundRefreshToken(key: DpopKey) {
    return (await dpopSignIn(a.issuer, user.sessionToken, key)).refresh_token;
  }

  it('a proof for another URL, another method, or older than the window', async () => {
    const key = await newDpopKey();
    const rt = await boundRefreshToken(key);
    const proofs = [
      await key.proof('POST', `${a.issuer}/oauth/userinfo`),
      await key.proof('GET', `${a.issuer}/oauth/token`),
      await key.proof('POST', `${a.issuer}/oauth/token`, { iat: Math.floor(Date.now() / 1000) - 120 }),
    ];
    for (const proof of proofs) {
      const r = await dpopTokenRequest(a.issuer, refreshForm(rt), proof);
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ error: 'invalid_dpop_proof' });
    }
    // The token was not spent by the refused requests.
    expect((await dpopTokenRequest(a.issuer, refreshForm(rt), key)).status).toBe(200);
  });

  it('a proof used twice, on the same replica or on the other one sharing Redis', async () => {
    const key = await newDpopKey();
    const proof = await key.proof('POST', `${a.issuer}/oauth/token`);
    const first = await dpopTokenRequest(a.issuer, refreshForm(await boundRefreshToken(key)), proof);
    expect(first.status).toBe(200);
    const again = await dpopTokenRequest(a.issuer, refreshForm(first.json.refresh_token as string), proof);
    expect(again.json.error).toBe('invalid_dpop_proof');
    // b's token endpoint URL is its own: a proof for b, replayed at b after its first use at b.
    const pb = await key.proof('POST', `${b.issuer}/oauth/token`);
    const firstB = await dpopTokenRequest(b.issuer, refreshForm(first.json.refresh_token as string), pb);
    expect(firstB.status).toBe(200);
    const replayB = await dpopTokenRequest(b.issuer, refreshForm(firstB.json.refresh_token as string), pb);
    expect(replayB.json.error).toBe('invalid_dpop_proof');
  });

  it('a proof replayed on the second replica of the same issuer', async () => {
    // Two replicas behind one issuer: b started with a's issuer (its htu), sharing the database and Redis.
    const twin = await startIdpProcess({
      databaseUrl: db.url,
      redisUrl: inject('redisUrl'),
      env: { PLATFORM_OIDC_ISSUER: a.issuer },
    });
    try {
      const key = await newDpopKey();
      const rt = await boundRefreshToken(key);
      const proof = await key.proof('POST', `${a.issuer}/oauth/token`);
      const first = await dpopTokenRequest(a.url, refreshForm(rt), proof);
      expect(first.status).toBe(200);
      const replay = await dpopTokenRequest(twin.url, refreshForm(first.json.refresh_token as string), proof);
      expect(replay.status).toBe(400);
      expect(replay.json.error).toBe('invalid_dpop_proof');
      // A fresh proof works on the twin: the refusal was the replay.
      const fresh = await dpopTokenRequest(
        twin.url,
        refreshForm(first.json.refresh_token as string),
        await key.proof('POST', `${a.issuer}/oauth/token`),
      );
      expect(fresh.status).toBe(200);
    } finally {
      await twin.stop();
    }
  });
});

describe('use_dpop_nonce (PLATFORM_DPOP_NONCE=on)', () => {
  it('a proof without the nonce gets 400 use_dpop_nonce and a DPoP-Nonce; the retry with it succeeds', async () => {
    const key = await newDpopKey();
    const t = await signIn(nonced.issuer, user.sessionToken);
    const first = await dpopTokenRequest(nonced.issuer, refreshForm(t.refresh_token), key);
    expect(first.status).toBe(400);
    expect(first.json.error).toBe('use_dpop_nonce');
    const nonce = first.res.headers.get('dpop-nonce');
    expect(nonce).toBeTruthy();
    const second = await dpopTokenRequest(nonced.issuer, refreshForm(t.refresh_token), key, {
      nonce: nonce!,
    });
    expect(second.status).toBe(200);
    expect(second.json.token_type).toBe('DPoP');
    expect(second.res.headers.get('dpop-nonce')).toBeTruthy();
    const wrong = await dpopTokenRequest(
      nonced.issuer,
      refreshForm(second.json.refresh_token as string),
      key,
      {
        nonce: 'made-up',
      },
    );
    expect(wrong.json.error).toBe('use_dpop_nonce');
  });
});

describe('administrators and protected routes', () => {
  const ADMIN = 'openid email mcp:platform platform:admin';

  it('PLATFORM_ADMIN_REQUIRE_DPOP=on: a Bearer token never carries platform:admin, a DPoP-bound one does', async () => {
    const bearer = await signIn(a.issuer, user.sessionToken, { scope: ADMIN });
    expect(bearer.scope.split(' ')).not.toContain('platform:admin');
    const key = await newDpopKey();
    const bound = await dpopSignIn(a.issuer, user.sessionToken, key, { scope: ADMIN });
    expect(bound.scope.split(' ')).toContain('platform:admin');
    const url = `${a.issuer}/admin/api/users/${encodeURIComponent(user.email)}`;
    const ok = await fetch(url, {
      headers: {
        authorization: `DPoP ${bound.access_token}`,
        dpop: await key.proof('GET', url, { accessToken: bound.access_token }),
      },
    });
    expect(ok.status).toBe(200);
  });

  it('a refused Bearer token: 401 challenging with both schemes, Bearer and DPoP with its algorithms', async () => {
    for (const path of ['/oauth/userinfo', `/admin/api/users/${encodeURIComponent(user.email)}`]) {
      const res = await fetch(`${a.issuer}${path}`, { headers: { authorization: 'Bearer not-a-token' } });
      expect(res.status).toBe(401);
      // Two WWW-Authenticate headers, read joined: the Bearer one first, then DPoP's.
      expect(res.headers.get('www-authenticate')).toMatch(
        /^Bearer error="invalid_token", DPoP algs="[^"]*ES256[^"]*"$/,
      );
    }
  });

  it("a stolen bound token sent as Bearer, or with the thief's proof: 401 with a DPoP challenge", async () => {
    const key = await newDpopKey();
    const bound = await dpopSignIn(a.issuer, user.sessionToken, key, { scope: ADMIN });
    const thief = await newDpopKey();
    for (const path of ['/oauth/userinfo', `/admin/api/users/${encodeURIComponent(user.email)}`]) {
      const url = `${a.issuer}${path}`;
      const asBearer = await fetch(url, { headers: { authorization: `Bearer ${bound.access_token}` } });
      expect(asBearer.status).toBe(401);
      expect(((await asBearer.json()) as { error: string }).error).toBe('invalid_token');
      expect(asBearer.headers.get('www-authenticate')).toMatch(
        /^DPoP error="invalid_token", algs="[^"]*ES256/,
      );
      const thiefProof = await fetch(url, {
        headers: {
          authorization: `DPoP ${bound.access_token}`,
          dpop: await thief.proof('GET', url, { accessToken: bound.access_token }),
        },
      });
      expect(thiefProof.status).toBe(401);
      expect(thiefProof.headers.get('www-authenticate')).toMatch(/^DPoP error="invalid_dpop_proof"/);
      const noAth = await fetch(url, {
        headers: { authorization: `DPoP ${bound.access_token}`, dpop: await key.proof('GET', url) },
      });
      expect(noAth.status).toBe(401);
      const proof = await key.proof('GET', url, { accessToken: bound.access_token });
      const once = await fetch(url, {
        headers: { authorization: `DPoP ${bound.access_token}`, dpop: proof },
      });
      expect(once.status).toBe(200);
      const twice = await fetch(url, {
        headers: { authorization: `DPoP ${bound.access_token}`, dpop: proof },
      });
      expect(twice.status).toBe(401);
    }
    expect(jwtPayload(bound.access_token).cnf).toEqual({ jkt: key.jkt });
  });
});
