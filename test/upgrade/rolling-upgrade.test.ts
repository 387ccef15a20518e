// A rolling upgrade from the previous release (the commit CHANGELOG.md names, taken from this repository's
// history) to this checkout, as Kubernetes or Swarm would roll it (docs/operations.md § Upgrading):
//   1. the previous release serves: two IdPs behind one issuer URL, two gateways behind one public URL, two tool
//      servers, on one Postgres and Redis, its own `platform migrate` having made the schema;
//   2. under a steady load of sign-ins, refreshes, revocations and tool calls, this release's `platform migrate`
//      runs; then a replica of each previous-release server is restarted on the migrated schema (what a crash or
//      a rollback does: expand-then-contract means the old code still runs there);
//   3. the replicas are replaced one at a time by this release's, each taken out of its load balancer's pool
//      before it is stopped (as a readiness probe or a Swarm update does).
// Not one request of the load may fail; every revocation made on any IdP is refused by every gateway alive
// within 1 s; and while old and new IdPs serve side by side, one refresh family is rotated alternately by each,
// its tokens accepted by old and new gateways.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type CallOutcome, callTool } from '../containers/load.ts';
import { callAdminApi } from '../helpers/admin-api.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { CLI, postForm, refresh, signIn } from '../helpers/oauth.ts';
import { checkoutPreviousRelease, type PreviousRelease } from '../helpers/previous-release.ts';
import {
  freePort,
  type GatewayProcess,
  type IdpProcess,
  PLATFORM_BIN,
  type RunningProcess,
  startGatewayProcess,
  startIdpProcess,
  startPlatform,
} from '../helpers/processes.ts';
import { type RoundRobin, startRoundRobin } from '../helpers/round-robin.ts';
import { IDENTITY_SECRET, toolKey } from '../tools/helpers.ts';

const AUDIENCE = 'https://platform.test/api';
/** The bound every gateway keeps for a revocation (docs/gateway.md). */
const REVOCATION_BOUND_MS = 1000;

type Era = 'previous' | 'current';
interface Replica<P extends RunningProcess> {
  era: Era;
  p: P;
  url: string;
}

let release: PreviousRelease;
let db: TestDatabase;
let admin: SeededUser;
let users: SeededUser[] = [];
let idpLb: RoundRobin;
let gatewayLb: RoundRobin;
let issuer: string;
const idps: Array<Replica<IdpProcess>> = [];
const gateways: Array<Replica<GatewayProcess>> = [];
const toolServers: Array<Replica<RunningProcess>> = [];
let toolPorts: number[] = [];

const binOf = (era: Era) => (era === 'previous' ? release.bin : PLATFORM_BIN);
/** Replicas taken out of their pool and about to stop: no new request goes to them. */
const retiring = new Set<Replica<RunningProcess>>();
const live = <P extends RunningProcess>(list: Array<Replica<P>>) =>
  list.filter((r) => r.p.child.exitCode === null && !retiring.has(r));

async function migrateWith(era: Era): Promise<string> {
  const p = startPlatform(['migrate'], { DATABASE_URL: db.url }, binOf(era));
  const code = await p.exited;
  if (code !== 0) throw new Error(`${era} release's platform migrate exited ${code}:\n${p.output()}`);
  return p.output();
}

async function startIdp(era: Era): Promise<Replica<IdpProcess>> {
  const p = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    bin: binOf(era),
    env: {
      PLATFORM_OIDC_ISSUER: issuer,
      PLATFORM_AUDIENCE: AUDIENCE,
      PLATFORM_ADMIN_EMAILS: admin.email,
      PLATFORM_SERVICES: 'platform',
      PLATFORM_RATE_LIMITS: 'token=1000000/60,revoke=100000/60,device=100000/60',
    },
  });
  const r = { era, p, url: p.url };
  idps.push(r);
  return r;
}

async function startGateway(era: Era): Promise<Replica<GatewayProcess>> {
  const p = await startGatewayProcess(
    {
      PUBLIC_BASE_URL: gatewayLb.url,
      GATEWAY_SERVICES: 'platform',
      PLATFORM_MCP_UPSTREAM: toolPorts.map((port) => `http://127.0.0.1:${port}`).join(','),
      PLATFORM_ISSUER: issuer,
      PLATFORM_AUDIENCE: AUDIENCE,
      REDIS_URL: inject('redisUrl'),
      GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
    },
    undefined,
    binOf(era),
  );
  const r = { era, p, url: p.url };
  gateways.push(r);
  return r;
}

async function startToolServer(era: Era, port: number): Promise<Replica<RunningProcess>> {
  const p = startPlatform(
    ['tool', 'platform'],
    { DATABASE_URL: db.url, TOOL_IDENTITY_KEY: toolKey('platform'), PLATFORM_MCP_PORT: String(port) },
    binOf(era),
  );
  await p.waitFor(/platform tool server listening/, 60_000);
  const r = { era, p, url: `http://127.0.0.1:${port}` };
  toolServers.push(r);
  return r;
}

/** Out of the pool first, in-flight requests given time to finish, then SIGTERM (a rolling update's order). */
async function retire<P extends RunningProcess>(
  r: Replica<P>,
  list: Array<Replica<P>>,
  lb?: RoundRobin,
): Promise<void> {
  retiring.add(r);
  lb?.setUpstreams(live(list).map((x) => x.url));
  await new Promise((res) => setTimeout(res, 300));
  const code = await r.p.stop();
  if (code !== 0 && code !== null)
    throw new Error(`${r.era} replica ${r.url} exited ${code}:\n${r.p.output()}`);
}

const toPool = <P extends RunningProcess>(list: Array<Replica<P>>, lb: RoundRobin) =>
  lb.setUpstreams(live(list).map((x) => x.url));

// ---- the load ----

interface Failure {
  what: string;
  detail: string;
}
const failures: Failure[] = [];
const counts = { signIns: 0, refreshes: 0, toolCalls: 0, revocations: 0, revocationChecks: 0 };
let loadRunning = false;
const loadLoops: Array<Promise<void>> = [];

function failed(what: string, detail: string): void {
  failures.push({ what, detail: detail.slice(0, 400) });
}

async function toolCallOk(baseUrl: string, token: string, what: string): Promise<void> {
  const r: CallOutcome = await callTool({ baseUrl, service: 'platform', token, tool: 'whoami', args: {} });
  counts.toolCalls++;
  if (!r.ok) failed(what, `${baseUrl}: ${r.status} ${r.detail}`);
}

const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)]!;

/** Sign in through the issuer's balancer, then call a tool through the gateways' balancer. */
async function signInLoop(): Promise<void> {
  while (loadRunning) {
    try {
      const t = await signIn(issuer, pick(users).sessionToken);
      counts.signIns++;
      await toolCallOk(gatewayLb.url, t.access_token, 'tool call after sign-in');
    } catch (err) {
      failed('sign-in', String(err));
    }
  }
}

/** Refresh families through the balancer, each new access token used at once. */
async function refreshLoop(): Promise<void> {
  const chains: string[] = [];
  for (let i = 0; i < 4; i++) chains.push((await signIn(issuer, pick(users).sessionToken)).refresh_token);
  while (loadRunning) {
    const i = Math.floor(Math.random() * chains.length);
    const r = await refresh(issuer, chains[i]!).catch((err: unknown) => ({
      status: 0,
      text: String(err),
      json: {} as Record<string, unknown>,
    }));
    if (r.status !== 200) {
      failed('refresh', `${r.status} ${r.text}`);
      await new Promise((res) => setTimeout(res, 100));
      continue;
    }
    counts.refreshes++;
    chains[i] = r.json.refresh_token as string;
    await toolCallOk(gatewayLb.url, r.json.access_token as string, 'tool call after refresh');
  }
}

/**
 * A gateway refuses `token` as revoked within the bound (polled); a failure names the gateway's release and
 * what it answered last.
 */
async function refusedBy(gw: Replica<GatewayProcess>, token: string, what: string): Promise<void> {
  const deadline = Date.now() + REVOCATION_BOUND_MS;
  let last: CallOutcome;
  do {
    last = await callTool({ baseUrl: gw.url, service: 'platform', token, tool: 'whoami', args: {} });
    if (last.status === 401 && last.detail.includes('token_revoked')) {
      counts.revocationChecks++;
      return;
    }
    if (gw.p.child.exitCode !== null || retiring.has(gw)) return; // retired meanwhile
    await new Promise((res) => setTimeout(res, 25));
  } while (Date.now() < deadline);
  failed(what, `${gw.era} gateway ${gw.url} still answered ${last.status} ${last.detail.slice(0, 120)}`);
}

/**
 * A user signs in and is revoked, alternately by revoke-user (admin API) and by revoking the refresh token
 * (RFC 7009), at one IdP replica chosen directly; every gateway alive must refuse the access token within the
 * bound, and the refresh token is refused.
 */
async function revocationLoop(): Promise<void> {
  const adminToken = (await signIn(issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
  let n = 0;
  while (loadRunning) {
    const victim = await seedUser(db.pool);
    const t = await signIn(issuer, victim.sessionToken).catch((err: unknown) => {
      failed('sign-in before revocation', String(err));
      return undefined;
    });
    if (!t) continue;
    const idp = pick(live(idps));
    const how = n++ % 2 === 0 ? 'revoke-user' : 'oauth/revoke';
    const r =
      how === 'revoke-user'
        ? await callAdminApi(idp.url, adminToken, 'POST', '/admin/api/revoke-user', { email: victim.email })
        : await postForm(`${idp.url}/oauth/revoke`, { token: t.refresh_token, client_id: CLI });
    if (r.status !== 200) {
      failed(`${how} at the ${idp.era} IdP`, `${r.status} ${JSON.stringify(r.json)}`);
      continue;
    }
    counts.revocations++;
    await Promise.all(
      live(gateways).map((gw) =>
        refusedBy(gw, t.access_token, `${how} at the ${idp.era} IdP (jti ${decodeJwt(t.access_token).jti})`),
      ),
    );
    const again = await refresh(issuer, t.refresh_token);
    if (again.status !== 400 || again.json.error !== 'invalid_grant')
      failed(`refresh after ${how}`, `${again.status} ${again.text}`);
    await new Promise((res) => setTimeout(res, 150));
  }
}

beforeAll(async () => {
  release = checkoutPreviousRelease();
  db = await createTestDatabase({ migrated: false });
  await migrateWith('previous');
  admin = await seedUser(db.pool);
  users = await Promise.all(Array.from({ length: 5 }, () => seedUser(db.pool)));
  const idpPort = await freePort();
  issuer = `http://127.0.0.1:${idpPort}`;
  gatewayLb = await startRoundRobin([], await freePort());
  toolPorts = [await freePort(), await freePort()];
  await Promise.all(toolPorts.map((port) => startToolServer('previous', port)));
  await Promise.all([startIdp('previous'), startIdp('previous')]);
  idpLb = await startRoundRobin(
    idps.map((r) => r.url),
    idpPort,
  );
  await Promise.all([startGateway('previous'), startGateway('previous')]);
  toPool(gateways, gatewayLb);
}, 180_000);

afterAll(async () => {
  loadRunning = false;
  await Promise.allSettled(loadLoops);
  await Promise.allSettled([...gateways, ...idps, ...toolServers].map((r) => r.p.stop()));
  await idpLb?.close();
  await gatewayLb?.close();
  await db?.drop();
  release?.remove();
});

describe('rolling upgrade from the previous release', () => {
  it('the previous release serves: sign-in, refresh, tool call through either gateway', async () => {
    expect(release.version).toMatch(/^\d+\.\d+\.\d+/);
    const t = await signIn(issuer, users[0]!.sessionToken);
    for (const gw of gateways) await toolCallOk(gw.url, t.access_token, 'previous release alone');
    expect((await refresh(issuer, t.refresh_token)).status).toBe(200);
    expect(failures).toEqual([]);
  });

  it("this release's migrations run while it serves, and its servers still start and serve on them", async () => {
    loadRunning = true;
    loadLoops.push(signInLoop(), signInLoop(), refreshLoop(), revocationLoop());
    await new Promise((res) => setTimeout(res, 1500));
    const out = await migrateWith('current');
    expect(out).toMatch(/migrat/i);
    // A replica of each previous-release server restarted on the migrated schema (a crash, a rollback).
    const [oldIdp] = live(idps);
    await retire(oldIdp!, idps, idpLb);
    await startIdp('previous');
    toPool(idps, idpLb);
    const [oldGateway] = live(gateways);
    await retire(oldGateway!, gateways, gatewayLb);
    await startGateway('previous');
    toPool(gateways, gatewayLb);
    const [oldTool] = live(toolServers);
    await retire(oldTool!, toolServers);
    await startToolServer('previous', Number(new URL(oldTool!.url).port));
    await new Promise((res) => setTimeout(res, 1500));
    expect(failures).toEqual([]);
  }, 120_000);

  it('replicas replaced one by one: old and new side by side, a family rotated by both, every token and revocation honoured', async () => {
    // IdPs: one new beside the old ones, then each old one out.
    const firstNew = await startIdp('current');
    toPool(idps, idpLb);
    const anOld = live(idps).find((r) => r.era === 'previous')!;
    // Side by side: one family rotated alternately by the old and the new IdP, each token accepted by every
    // gateway (old ones now; the new gateways below).
    let chain = await signIn(issuer, users[1]!.sessionToken);
    const rotatedBy: Era[] = [];
    for (const idp of [anOld, firstNew, anOld, firstNew]) {
      const r = await refresh(idp.url, chain.refresh_token);
      if (r.status !== 200) failed(`refresh at the ${idp.era} IdP`, `${r.status} ${r.text}`);
      else {
        rotatedBy.push(idp.era);
        chain = r.json as typeof chain;
        for (const gw of live(gateways))
          await toolCallOk(gw.url, chain.access_token, `${idp.era} IdP's token at the ${gw.era} gateway`);
      }
    }
    expect(rotatedBy).toEqual(['previous', 'current', 'previous', 'current']);
    // The new replica started first was the surge: the first old one goes without a replacement.
    for (const [i, old] of live(idps)
      .filter((r) => r.era === 'previous')
      .entries()) {
      await retire(old, idps, idpLb);
      if (i > 0) await startIdp('current');
      toPool(idps, idpLb);
    }
    // Gateways: a new one beside the old ones, the same checks from the other side, then each old one out.
    const newGateway = await startGateway('current');
    toPool(gateways, gatewayLb);
    for (const gw of live(gateways))
      await toolCallOk(gw.url, chain.access_token, `a token at the ${gw.era} gateway`);
    expect(newGateway.era).toBe('current');
    for (const [i, old] of live(gateways)
      .filter((r) => r.era === 'previous')
      .entries()) {
      await retire(old, gateways, gatewayLb);
      if (i > 0) await startGateway('current');
      toPool(gateways, gatewayLb);
    }
    // Tool servers, one port at a time (the gateways try the other upstream meanwhile).
    for (const old of live(toolServers).filter((r) => r.era === 'previous')) {
      await retire(old, toolServers);
      await startToolServer('current', Number(new URL(old.url).port));
    }
    await new Promise((res) => setTimeout(res, 2000));
    loadRunning = false;
    await Promise.all(loadLoops);
    // The family signed in before the upgrade still rotates on the new release.
    expect((await refresh(issuer, chain.refresh_token)).status).toBe(200);
    expect(live(idps).map((r) => r.era)).toEqual(['current', 'current']);
    expect(live(gateways).map((r) => r.era)).toEqual(['current', 'current']);
    expect(live(toolServers).map((r) => r.era)).toEqual(['current', 'current']);
    expect(failures).toEqual([]);
    // The load was a load: every kind of request ran throughout.
    expect(counts.signIns).toBeGreaterThan(20);
    expect(counts.refreshes).toBeGreaterThan(20);
    expect(counts.revocations).toBeGreaterThan(5);
    expect(counts.toolCalls).toBeGreaterThan(60);
  }, 180_000);
});
