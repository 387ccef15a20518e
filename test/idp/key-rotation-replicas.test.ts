// Automated signing-key rotation across replicas (docs/idp.md § Signing-key rotation): three IdP replicas behind
// one issuer URL, two gateways, a schedule in seconds. Under continuous sign-ins, refreshes and tool calls no
// valid token is refused through several rotations (the gateways may not fetch a key set for an unknown kid at
// all: their cooldown is an hour, so only the published-ahead schedule keeps them current); every replica signs
// with the key the timestamps make current; retired keys keep verifying; and an emergency rotation makes the
// withdrawn key's tokens fail at both gateways within the documented bound, after which a refresh recovers.
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  call,
  type GatewayResponse,
  startGatewayProcess,
  startUpstream,
  type Upstream,
} from '../gateway/helpers.ts';
import { callAdminApi } from '../helpers/admin-api.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { freePort, type GatewayProcess, type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { type RoundRobin, startRoundRobin } from '../helpers/round-robin.ts';

const PUBLISH_AHEAD_S = 6;
const LIFETIME_S = 10;
const ROTATIONS = 3;
/** docs/idp.md § Emergency rotation: withdrawn tokens refused at a connected gateway within this. */
const EMERGENCY_BOUND_MS = 5000;
const ENCRYPTION_KEY = 'replica-test-key-encryption-secret-0123456789abcdef';

let db: TestDatabase;
let idps: IdpProcess[] = [];
let lb: RoundRobin;
let gateways: GatewayProcess[] = [];
let upstream: Upstream;
let admin: SeededUser;
let issuer: string;

interface KeyRow {
  kid: string;
  state: string;
  activated_at: string | null;
  retired_at: string | null;
  withdrawn_at: string | null;
}

async function adminApi(method: 'GET' | 'POST', path: string, body?: unknown) {
  const { access_token } = await signIn(issuer, admin.sessionToken, { scope: 'platform:admin' });
  const { status, json } = await callAdminApi(issuer, access_token, method, path, body);
  // biome-ignore lint/suspicious/noExplicitAny: asserted structurally
  return { status, json: json as any };
}

const listKeys = async (): Promise<KeyRow[]> => (await adminApi('GET', '/admin/api/keys')).json.items;
const kidOf = (token: string) => decodeProtectedHeader(token).kid as string;
const viaGateway = (gw: GatewayProcess, token: string): Promise<GatewayResponse> =>
  call(`${gw.url}/mail/mcp`, { method: 'POST', token });

beforeAll(async () => {
  db = await createTestDatabase();
  admin = await seedUser(db.pool);
  upstream = await startUpstream();
  const lbPort = await freePort();
  issuer = `http://127.0.0.1:${lbPort}`;
  // Started together: the first to take the rotation lock creates the one initial key, the others read it.
  idps = await Promise.all(
    [0, 1, 2].map(() =>
      startIdpProcess({
        databaseUrl: db.url,
        redisUrl: inject('redisUrl'),
        env: {
          PLATFORM_OIDC_ISSUER: issuer,
          PLATFORM_OIDC_PRIVATE_KEY: '',
          PLATFORM_KEY_ROTATION: 'auto',
          PLATFORM_KEY_ENCRYPTION_KEY: ENCRYPTION_KEY,
          PLATFORM_KEY_PUBLISH_AHEAD: `${PUBLISH_AHEAD_S}s`,
          PLATFORM_KEY_LIFETIME: `${LIFETIME_S}s`,
          PLATFORM_ADMIN_EMAILS: admin.email,
          PLATFORM_SERVICES: 'platform,mail',
          PLATFORM_RATE_LIMITS: 'token=1000000/60',
        },
      }),
    ),
  );
  lb = await startRoundRobin(
    idps.map((p) => p.url),
    lbPort,
  );
  gateways = await Promise.all(
    [0, 1].map(() =>
      startGatewayProcess({
        PUBLIC_BASE_URL: 'https://mcp.rotation.test',
        GATEWAY_SERVICES: 'mail',
        MAIL_MCP_UPSTREAM: upstream.url,
        PLATFORM_ISSUER: issuer,
        PLATFORM_AUDIENCE: idps[0]!.audience,
        REDIS_URL: inject('redisUrl'),
        // No refetch for an unknown kid after the first load: only the schedule keeps the gateways current.
        GATEWAY_JWKS_COOLDOWN_SECONDS: '3600',
      }),
    ),
  );
}, 60_000);

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  await lb?.close();
  await Promise.all(idps.map((p) => p.stop()));
  await upstream?.close();
  await db?.drop();
});

describe('signing keys rotated by the schedule, three replicas, two gateways', () => {
  it('starts with one key for all replicas, served with a max-age below the margin', async () => {
    const keys = await listKeys();
    expect(keys.map((k) => k.state)).toEqual(['current']);
    for (let i = 0; i < idps.length; i++) {
      const res = await fetch(`${idps[i]!.url}/.well-known/jwks.json`);
      expect(res.headers.get('cache-control')).toBe(`public, max-age=${Math.floor(PUBLISH_AHEAD_S / 4)}`);
      expect(((await res.json()) as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid)).toEqual([
        keys[0]!.kid,
      ]);
    }
  });

  it(`refuses no valid token through ${ROTATIONS} rotations; retired keys keep verifying`, async () => {
    const refused: string[] = [];
    const issued: Array<{ token: string; kid: string; iat: number }> = [];
    let stop = false;
    const worker = async (w: number) => {
      let t = await signIn(issuer, admin.sessionToken);
      for (let i = 0; !stop; i++) {
        issued.push({
          token: t.access_token,
          kid: kidOf(t.access_token),
          iat: decodeJwt(t.access_token).iat!,
        });
        for (const gw of gateways) {
          const r = await viaGateway(gw, t.access_token);
          if (r.status !== 200)
            refused.push(
              `worker ${w}: ${r.status} kid ${kidOf(t.access_token)} at ${new Date().toISOString()}`,
            );
        }
        if (i % 10 === 9) t = await signIn(issuer, admin.sessionToken);
        else {
          const r = await refresh(issuer, t.refresh_token);
          expect(r.status).toBe(200);
          t = r.json as typeof t;
        }
      }
    };
    const load = Promise.all([0, 1].map(worker));
    const deadline = Date.now() + (ROTATIONS + 2) * LIFETIME_S * 1000;
    let keys = await listKeys();
    while (keys.filter((k) => k.activated_at !== null).length < ROTATIONS + 1 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1000));
      keys = await listKeys();
    }
    stop = true;
    await load;

    expect(refused).toEqual([]);
    const activated = keys.filter((k) => k.activated_at !== null);
    expect(activated.length).toBeGreaterThanOrEqual(ROTATIONS + 1);
    expect(keys.filter((k) => k.state === 'current')).toHaveLength(1);
    // Every replica signed with the key the stored timestamps made current (1 s: iat's resolution).
    const byKid = new Map(keys.map((k) => [k.kid, k]));
    const misplaced = issued.filter(({ kid, iat }) => {
      const k = byKid.get(kid);
      if (!k?.activated_at) return true;
      const from = Date.parse(k.activated_at) / 1000 - 1;
      const until = k.retired_at ? Date.parse(k.retired_at) / 1000 + 1 : Number.POSITIVE_INFINITY;
      return iat < from || iat > until;
    });
    expect(misplaced.map((m) => `${m.kid} iat ${m.iat}`)).toEqual([]);
    const kidsUsed = [...new Set(issued.map((i) => i.kid))];
    expect(kidsUsed.length).toBeGreaterThanOrEqual(ROTATIONS + 1);
    // The first token of every retired key still verifies at both gateways (its key stays published until
    // every token it signed has expired).
    for (const kid of kidsUsed) {
      if (byKid.get(kid)!.state !== 'previous') continue;
      const first = issued.find((i) => i.kid === kid)!;
      for (const gw of gateways) expect((await viaGateway(gw, first.token)).status).toBe(200);
    }
    const jwks = (await (await fetch(`${issuer}/.well-known/jwks.json`)).json()) as {
      keys: Array<{ kid: string }>;
    };
    expect(jwks.keys.map((k) => k.kid).sort()).toEqual(
      keys
        .filter((k) => ['next', 'current', 'previous'].includes(k.state))
        .map((k) => k.kid)
        .sort(),
    );
    // Each activation and retirement is in the audit once, written by one replica.
    const audit = await db.pool.query<{ action: string; target: string }>(
      `SELECT action, target FROM platform.admin_audit WHERE action LIKE 'key-%'`,
    );
    const activations = audit.rows.filter((r) => r.action === 'key-activated').map((r) => r.target);
    expect(new Set(activations).size).toBe(activations.length);
    expect(audit.rows.filter((r) => r.action === 'key-created').length).toBe(keys.length);
  }, 120_000);

  it('emergency: the withdrawn key is refused at both gateways within the bound; a refresh recovers', async () => {
    const t = await signIn(issuer, admin.sessionToken);
    const old = kidOf(t.access_token);
    for (const gw of gateways) expect((await viaGateway(gw, t.access_token)).status).toBe(200);

    const r = await adminApi('POST', '/admin/api/keys/rotate', { emergency: true });
    expect(r.status).toBe(201);
    expect(r.json.withdrawn).toContain(old);
    const started = Date.now();
    for (const gw of gateways) {
      let res = await viaGateway(gw, t.access_token);
      while (res.status === 200 && Date.now() - started < EMERGENCY_BOUND_MS) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        res = await viaGateway(gw, t.access_token);
      }
      expect(res.status).toBe(401);
    }
    expect(Date.now() - started).toBeLessThan(EMERGENCY_BOUND_MS);

    // Every replica stopped publishing it.
    for (const p of idps) {
      const set = (await (await fetch(`${p.url}/.well-known/jwks.json`)).json()) as {
        keys: Array<{ kid: string }>;
      };
      expect(set.keys.map((k) => k.kid)).not.toContain(old);
    }
    const again = await refresh(issuer, t.refresh_token);
    expect(again.status).toBe(200);
    const fresh = again.json.access_token as string;
    expect(kidOf(fresh)).toBe(r.json.kid);
    for (const gw of gateways) expect((await viaGateway(gw, fresh)).status).toBe(200);
    const keys = await listKeys();
    expect(keys.find((k) => k.kid === old)!.state).toBe('withdrawn');
    const withdrawnAudit = await db.pool.query(
      `SELECT actor_email FROM platform.admin_audit WHERE action = 'key-withdrawn' AND target = $1`,
      [old],
    );
    expect(withdrawnAudit.rows).toEqual([{ actor_email: admin.email }]);
  }, 60_000);
});
