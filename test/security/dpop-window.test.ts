// A DPoP proof's acceptance window and its jti's retention, at the IdP (token endpoint, userinfo, admin API) and
// at the gateway, against real processes and the shared Redis: a proof whose `iat` is as far ahead of the clock
// as either server accepts is remembered until its window has closed (the IdP kept it 65 s, the gateway 66 s,
// while such a proof stays acceptable 65 s and more). And PLATFORM_DPOP_NONCE wherever the IdP checks a proof.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DPOP_FUTURE_LEEWAY_SECONDS, DPOP_MAX_AGE_SECONDS, dpopJtiKey } from '../../lib/dpop/index.ts';
import {
  dpopProof,
  type DpopKey as GatewayDpopKey,
  type GatewayStack,
  newDpopKey as newGatewayDpopKey,
  platformToken,
  postMailDpop,
  startGatewayStack,
} from '../gateway/helpers.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { type DpopKey, dpopTokenRequest, newDpopKey } from '../helpers/dpop.ts';
import { CLI, obtainCode } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

let db: TestDatabase;
let admin: SeededUser;
/** PLATFORM_DPOP_NONCE=on. */
let idp: IdpProcess;
let stack: GatewayStack;
let redis: Redis;

beforeAll(async () => {
  db = await createTestDatabase();
  admin = await seedUser(db.pool);
  redis = new Redis(inject('redisUrl'));
  [idp, stack] = await Promise.all([
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl: inject('redisUrl'),
      env: { PLATFORM_ADMIN_EMAILS: admin.email, PLATFORM_DPOP_NONCE: 'on' },
    }),
    startGatewayStack(inject('redisUrl')),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([idp?.stop(), stack?.stop()]);
  redis?.disconnect();
  await db?.drop();
});

const nowSeconds = () => Math.floor(Date.now() / 1000);

/**
 * The proof's jti is remembered at least until its acceptance window has closed: the window ends one second
 * after iat + the maximum age (whole-second clocks), measured from now (after the server accepted it).
 */
async function expectRememberedThroughWindow(jti: string, jkt: string, iat: number) {
  const pttl = await redis.pttl(dpopJtiKey(jti, jkt));
  const windowClosesMs = (iat + DPOP_MAX_AGE_SECONDS + 1) * 1000;
  expect(pttl).toBeGreaterThanOrEqual(windowClosesMs - Date.now());
}

/**
 * The same, for the admin API's proofs, which are recorded in Postgres (an administrator can act while Redis is
 * away): the row's expiry is at least the window's close.
 */
async function expectRecordedThroughWindow(jti: string, jkt: string, iat: number) {
  const { rows } = await db.pool.query<{ ms: string }>(
    `SELECT (extract(epoch FROM expires_at) * 1000)::bigint AS ms FROM platform.client_assertion_jtis
      WHERE client_id = 'dpop:admin' AND jti = $1`,
    [dpopJtiKey(jti, jkt)],
  );
  expect(rows).toHaveLength(1);
  expect(Number(rows[0]!.ms)).toBeGreaterThanOrEqual((iat + DPOP_MAX_AGE_SECONDS + 1) * 1000);
}

/** The IdP's current nonce, from a token request without one (400 use_dpop_nonce with `DPoP-Nonce`). */
async function currentNonce(key: DpopKey): Promise<string> {
  const r = await dpopTokenRequest(
    idp.issuer,
    { grant_type: 'refresh_token', refresh_token: 'x', client_id: CLI },
    key,
  );
  expect(r.json.error).toBe('use_dpop_nonce');
  return r.res.headers.get('dpop-nonce')!;
}

describe('a proof dated as far ahead as accepted is remembered until it expires', () => {
  let key: DpopKey;
  let access: string;

  it('the token endpoint: a proof with iat = now + the leeway signs in, and its jti outlives its window', async () => {
    key = await newDpopKey();
    const c = await obtainCode({
      issuer: idp.issuer,
      sessionToken: admin.sessionToken,
      params: { scope: 'openid email platform:admin' },
    });
    const iat = nowSeconds() + DPOP_FUTURE_LEEWAY_SECONDS;
    const jti = crypto.randomUUID();
    const r = await dpopTokenRequest(
      idp.issuer,
      {
        grant_type: 'authorization_code',
        code: c.code,
        code_verifier: c.verifier,
        redirect_uri: c.redirectUri,
        client_id: CLI,
      },
      key,
      { iat, jti, nonce: await currentNonce(key) },
    );
    expect(r.status).toBe(200);
    access = String(r.json.access_token);
    await expectRememberedThroughWindow(jti, key.jkt, iat);
  });

  it('userinfo and the admin API: the same proof is refused twice, and remembered through its window', async () => {
    const nonce = await currentNonce(key);
    for (const path of ['/oauth/userinfo', `/admin/api/users/${encodeURIComponent(admin.email)}`]) {
      const url = `${idp.issuer}${path}`;
      const iat = nowSeconds() + DPOP_FUTURE_LEEWAY_SECONDS;
      const jti = crypto.randomUUID();
      const proof = await key.proof('GET', url, { accessToken: access, iat, jti, nonce });
      const send = () => fetch(url, { headers: { authorization: `DPoP ${access}`, dpop: proof } });
      expect((await send()).status).toBe(200);
      if (path.startsWith('/admin/')) await expectRecordedThroughWindow(jti, key.jkt, iat);
      else await expectRememberedThroughWindow(jti, key.jkt, iat);
      expect((await send()).status).toBe(401);
    }
  });

  it('the gateway: the same rule', async () => {
    const holder: GatewayDpopKey = await newGatewayDpopKey();
    const gw = await stack.gateway();
    const token = await platformToken(stack.ks, { email: 'alice@example.test', cnf: { jkt: holder.jkt } });
    const htu = 'https://mcp.example.test/mail/mcp';
    // The gateway's key set fetched first, so the proof below is accepted as soon as it is made.
    expect((await postMailDpop(gw, token, await dpopProof(holder, { htm: 'POST', htu, token }))).status).toBe(
      200,
    );
    const jti = crypto.randomUUID();
    const iat = nowSeconds() + DPOP_FUTURE_LEEWAY_SECONDS;
    const proof = await dpopProof(holder, {
      htm: 'POST',
      htu: 'https://mcp.example.test/mail/mcp',
      token,
      claims: { iat, jti },
    });
    expect((await postMailDpop(gw, token, proof)).status).toBe(200);
    await expectRememberedThroughWindow(jti, holder.jkt, iat);
    expect((await postMailDpop(gw, token, proof)).status).toBe(401);
  });
});

describe('PLATFORM_DPOP_NONCE at userinfo and the admin API', () => {
  it('a proof without the nonce: 401 use_dpop_nonce with a DPoP-Nonce; with it: 200 and a fresh one', async () => {
    const key = await newDpopKey();
    const c = await obtainCode({
      issuer: idp.issuer,
      sessionToken: admin.sessionToken,
      params: { scope: 'openid email platform:admin' },
    });
    const form = {
      grant_type: 'authorization_code',
      code: c.code,
      code_verifier: c.verifier,
      redirect_uri: c.redirectUri,
      client_id: CLI,
    };
    const t = await dpopTokenRequest(idp.issuer, form, key, { nonce: await currentNonce(key) });
    expect(t.status).toBe(200);
    const access = String(t.json.access_token);
    for (const path of ['/oauth/userinfo', `/admin/api/users/${encodeURIComponent(admin.email)}`]) {
      const url = `${idp.issuer}${path}`;
      for (const nonce of [undefined, 'made-up']) {
        const refused = await fetch(url, {
          headers: {
            authorization: `DPoP ${access}`,
            dpop: await key.proof('GET', url, { accessToken: access, nonce }),
          },
        });
        expect(refused.status).toBe(401);
        expect(((await refused.json()) as { error: string }).error).toBe('use_dpop_nonce');
        expect(refused.headers.get('www-authenticate')).toMatch(/^DPoP error="use_dpop_nonce", algs="/);
        expect(refused.headers.get('dpop-nonce')).toBeTruthy();
      }
      const asked = await fetch(url, {
        headers: {
          authorization: `DPoP ${access}`,
          dpop: await key.proof('GET', url, { accessToken: access }),
        },
      });
      const nonce = asked.headers.get('dpop-nonce')!;
      const ok = await fetch(url, {
        headers: {
          authorization: `DPoP ${access}`,
          dpop: await key.proof('GET', url, { accessToken: access, nonce }),
        },
      });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('dpop-nonce')).toBeTruthy();
    }
  });
});
