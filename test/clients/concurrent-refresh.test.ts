// Concurrent refresh: two processes of one client present the same refresh token at once, then each keeps
// refreshing from what it got for 50 rotations, calling a tool through the gateway now and then. Both keep
// working and no family is revoked; outside PLATFORM_REFRESH_RETRY_SECONDS a replay is still reuse.
// Why clients do this:
// - Claude Code holds its refresh lock per process: concurrent sessions race on the same refresh token, and a
//   rotation-strict server revokes the whole family (anthropics/claude-code#85236); it also presents an
//   already-rotated refresh token again (anthropics/claude-code#66210).
// - Codex sessions share the keyring and hold stale refresh tokens; servers answered with a reuse grace
//   (exceptionless/Exceptionless#2404).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashRefreshToken } from '../../idp/endpoints/token-response.ts';
import { call, errorOf } from '../gateway/helpers.ts';
import { callAdminApi } from '../helpers/admin-api.ts';
import { registerClient, startCallbackServer } from '../helpers/clients.ts';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { jktOf, newDpopKey, postFormWithProof, type TestDpopKey } from '../helpers/dpop-client.ts';
import { CLI, exchangeCode, LOOPBACK, obtainCode, refresh, signIn } from '../helpers/oauth.ts';
import { type ChainResult, startRefreshChain } from '../helpers/refresh-chain-process.ts';
import { type Stack, startStack } from '../tools/stack.ts';

let stack: Stack;
let user: SeededUser;
let admin: SeededUser;
let adminToken: string;
let publicClient: { clientId: string; redirectUri: string };
let closeCallback: () => Promise<void>;

beforeAll(async () => {
  const adminEmail = `admin-${randomBytes(4).toString('hex')}@example.com`;
  stack = await startStack({
    adminEmails: [adminEmail],
    prepare: async (db) => {
      admin = await seedUser(db.pool, { email: adminEmail });
      user = await seedUser(db.pool);
    },
  });
  const cb = await startCallbackServer();
  closeCallback = cb.close;
  const redirectUri = `http://127.0.0.1:${cb.port}/callback`;
  // A public MCP client registering as the MCP SDK clients do (RFC 7591, no secret).
  const reg = await registerClient(stack.idp.issuer, {
    client_name: 'Concurrent MCP client',
    redirect_uris: [redirectUri],
    token_endpoint_auth_method: 'none',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
  });
  expect(reg.status).toBe(201);
  publicClient = { clientId: reg.json.client_id, redirectUri };
}, 120_000);

afterAll(async () => {
  await closeCallback?.();
  await stack?.stop();
});

const iss = () => stack.idp.issuer;

async function signInWith(clientId: string, redirectUri: string) {
  const c = await obtainCode({
    issuer: iss(),
    sessionToken: user.sessionToken,
    params: { client_id: clientId, redirect_uri: redirectUri, scope: 'openid email mcp:platform' },
  });
  const r = await exchangeCode(iss(), c);
  expect(r.status).toBe(200);
  return r.json as { access_token: string; refresh_token: string };
}

/** A sign-in whose tokens are bound to `key` (the code exchanged with a proof by it). */
async function signInBound(key: TestDpopKey) {
  const c = await obtainCode({
    issuer: iss(),
    sessionToken: user.sessionToken,
    params: {
      client_id: publicClient.clientId,
      redirect_uri: publicClient.redirectUri,
      scope: 'openid email mcp:platform',
    },
  });
  const r = await postFormWithProof(
    `${iss()}/oauth/token`,
    {
      grant_type: 'authorization_code',
      code: c.code,
      code_verifier: c.verifier,
      redirect_uri: c.redirectUri,
      client_id: c.clientId,
    },
    key,
  );
  expect(r.status, r.text).toBe(200);
  expect(r.json.token_type).toBe('DPoP');
  return r.json as { access_token: string; refresh_token: string };
}

const refreshBound = (refreshToken: string, key: TestDpopKey | undefined) =>
  postFormWithProof(
    `${iss()}/oauth/token`,
    { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: publicClient.clientId },
    key,
  );

async function familyOf(refreshToken: string) {
  const { rows } = await stack.db.pool.query<{ id: string; revoked_reason: string | null; revoked: number }>(
    `SELECT f.id::text, f.revoked_reason,
            (SELECT count(*)::int FROM platform.refresh_tokens t WHERE t.family_id = f.id AND t.revoked_at IS NOT NULL)
              AS revoked
       FROM platform.refresh_families f
      WHERE f.id = (SELECT family_id FROM platform.refresh_tokens WHERE token_hash = $1)`,
    [hashRefreshToken(refreshToken)],
  );
  return rows[0]!;
}

/** The gateway's answer to a tools/list with this bearer, polled until it is a 401 or `boundMs` passed. */
async function gatewayRefuses(accessToken: string, boundMs = 5000) {
  const deadline = Date.now() + boundMs;
  for (;;) {
    const res = await call(`${stack.baseUrl}/platform/mcp`, {
      method: 'POST',
      token: accessToken,
      headers: { accept: 'application/json, text/event-stream' },
    });
    if (res.status === 401 || Date.now() > deadline)
      return { status: res.status, reason: errorOf(res).reason };
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function adminApi(method: 'GET' | 'DELETE', path: string) {
  adminToken ??= (await signIn(iss(), admin.sessionToken, { scope: 'platform:admin' })).access_token;
  return callAdminApi(iss(), adminToken, method, path);
}

const ROUNDS = 50;

describe.each([
  { name: 'a registered public client', client: () => publicClient },
  { name: 'platform-cli', client: () => ({ clientId: CLI, redirectUri: LOOPBACK }) },
])('two processes of $name refresh the same token at once', ({ client }) => {
  let chains: ChainResult[];
  let first: { access_token: string; refresh_token: string };

  it(`both keep a working chain for ${ROUNDS} rotations, calling a tool through the gateway, and the family stays live`, async () => {
    const { clientId, redirectUri } = client();
    first = await signInWith(clientId, redirectUri);
    const processes = [0, 1].map(() =>
      startRefreshChain({
        issuer: iss(),
        clientId,
        refreshToken: first.refresh_token,
        gatewayUrl: stack.baseUrl,
        rounds: ROUNDS,
        callEvery: 10,
      }),
    );
    await Promise.all(processes.map((p) => p.ready));
    for (const p of processes) p.go();
    chains = await Promise.all(processes.map((p) => p.result));

    for (const c of chains) {
      expect(c.refused).toBeUndefined();
      expect(c.refreshes).toBe(ROUNDS + 1);
      expect(c.calls).toEqual(Array(ROUNDS / 10 + 1).fill(`${user.email} ${clientId}`));
    }
    // Two chains: the shared token was rotated twice, into different successors, and nothing is shared after.
    const [a, b] = chains as [ChainResult, ChainResult];
    expect(a.refreshTokens.filter((t) => b.refreshTokens.includes(t))).toEqual([]);

    const family = await familyOf(first.refresh_token);
    expect(family).toMatchObject({ revoked_reason: null, revoked: 0 });
    const { rows } = await stack.db.pool.query(
      `SELECT rotations FROM platform.refresh_tokens WHERE token_hash = $1`,
      [hashRefreshToken(first.refresh_token)],
    );
    expect(rows).toEqual([{ rotations: 2 }]);
    // The admin API lists the sign-in as live.
    const u = await adminApi('GET', `/admin/api/users/${encodeURIComponent(user.email)}`);
    expect(u.status).toBe(200);
    expect(u.json.sign_ins).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: family.id, client_id: clientId })]),
    );
    // Each process can still refresh from where it stopped.
    for (const c of chains)
      expect((await refresh(iss(), c.refreshTokens.at(-1)!, clientId)).status).toBe(200);
  }, 180_000);

  it('revoking the sign-in ends both chains: their refresh tokens and access tokens are refused', async () => {
    const { clientId } = client();
    const family = await familyOf(first.refresh_token);
    const del = await adminApi('DELETE', `/admin/api/sign-ins/${family.id}`);
    expect(del).toMatchObject({ status: 200, json: { id: family.id, revoked: true } });
    for (const c of chains) {
      expect((await refresh(iss(), c.refreshTokens.at(-1)!, clientId)).json.error).toBe('invalid_grant');
      expect(await gatewayRefuses(c.accessTokens.at(-1)!)).toEqual({ status: 401, reason: 'token_revoked' });
    }
  });
});

describe('outside the window', () => {
  it('a rotated-out token replayed after PLATFORM_REFRESH_RETRY_SECONDS (60 s by default) is reuse: invalid_grant, the family revoked', async () => {
    const t = await signInWith(CLI, LOOPBACK);
    const r1 = await refresh(iss(), t.refresh_token);
    expect(r1.status).toBe(200);
    await stack.db.pool.query(
      `UPDATE platform.refresh_tokens SET rotated_at = now() - interval '61 seconds' WHERE token_hash = $1`,
      [hashRefreshToken(t.refresh_token)],
    );
    const replay = await refresh(iss(), t.refresh_token);
    expect(replay.status).toBe(400);
    expect(replay.json).toEqual({
      error: 'invalid_grant',
      error_description: 'refresh token was already used; the grant is revoked',
    });
    // The legitimate holder's chain dies with it, refresh and access token alike.
    expect((await refresh(iss(), r1.json.refresh_token as string)).json.error).toBe('invalid_grant');
    expect(await familyOf(t.refresh_token)).toMatchObject({ revoked_reason: 'reuse detected' });
    expect(await gatewayRefuses(r1.json.access_token as string)).toEqual({
      status: 401,
      reason: 'token_revoked',
    });
  });

  it('the window is counted from the first rotation: a sibling rotation does not extend it', async () => {
    const t = await signInWith(CLI, LOOPBACK);
    expect((await refresh(iss(), t.refresh_token)).status).toBe(200);
    const hash = hashRefreshToken(t.refresh_token);
    await stack.db.pool.query(
      `UPDATE platform.refresh_tokens SET rotated_at = now() - interval '50 seconds' WHERE token_hash = $1`,
      [hash],
    );
    const sibling = await refresh(iss(), t.refresh_token);
    expect(sibling.status).toBe(200);
    // 11 s later than the first rotation's 50 s: 61 s, outside, had the sibling not moved the anchor.
    await stack.db.pool.query(
      `UPDATE platform.refresh_tokens SET rotated_at = rotated_at - interval '11 seconds' WHERE token_hash = $1`,
      [hash],
    );
    expect((await refresh(iss(), t.refresh_token)).json.error).toBe('invalid_grant');
    expect(await familyOf(t.refresh_token)).toMatchObject({ revoked_reason: 'reuse detected' });
    expect((await refresh(iss(), sibling.json.refresh_token as string)).json.error).toBe('invalid_grant');
  });
});

describe('a DPoP-bound client (RFC 9449)', () => {
  it('two processes holding the key refresh the same bound token at once and both keep working chains, with proofs', async () => {
    const key = await newDpopKey();
    const first = await signInBound(key);
    expect(jktOf(first.access_token)).toBe(key.thumbprint);
    const processes = [0, 1].map(() =>
      startRefreshChain({
        issuer: iss(),
        clientId: publicClient.clientId,
        refreshToken: first.refresh_token,
        gatewayUrl: stack.baseUrl,
        rounds: 20,
        callEvery: 10,
        dpopJwk: key.jwk,
      }),
    );
    await Promise.all(processes.map((p) => p.ready));
    for (const p of processes) p.go();
    const chains = await Promise.all(processes.map((p) => p.result));
    for (const c of chains) {
      expect(c.refused).toBeUndefined();
      expect(c.refreshes).toBe(21);
      expect(c.calls).toEqual(Array(3).fill(`${user.email} ${publicClient.clientId}`));
      for (const t of c.accessTokens) expect(jktOf(t)).toBe(key.thumbprint);
    }
    expect(await familyOf(first.refresh_token)).toMatchObject({ revoked_reason: null, revoked: 0 });
  }, 180_000);

  it("a thief's replay of a bound rotated-out refresh token, inside the retry window, without the key or with another key, gets invalid_grant and changes nothing", async () => {
    const key = await newDpopKey();
    const t = await signInBound(key);
    const next = await refreshBound(t.refresh_token, key);
    expect(next.status).toBe(200);
    const thief = await newDpopKey();
    for (const attempt of [undefined, thief]) {
      const replay = await refreshBound(t.refresh_token, attempt);
      expect(replay.status).toBe(400);
      expect(replay.json.error).toBe('invalid_grant');
    }
    // Nothing changed: the family is live, no token revoked, and the holder refreshes on with its key.
    expect(await familyOf(t.refresh_token)).toMatchObject({ revoked_reason: null, revoked: 0 });
    expect((await refreshBound(next.json.refresh_token as string, key)).status).toBe(200);
    // The holder's own second process (same key) is still inside the window.
    expect((await refreshBound(t.refresh_token, key)).status).toBe(200);
  });
});
