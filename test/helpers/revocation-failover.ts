// The failover scenario the Redis HA tests share (test/ha/redis-*.test.ts): a real IdP and two real gateways on
// a highly available Redis; the IdP revokes a token every 50 ms through its admin API while the test kills the
// Redis master (SIGKILL, after freezing its replica so the last acknowledged writes never reach it); then every
// revocation the IdP acknowledged must be refused by every gateway — the two that lived through the failover and
// one started after it — within 5 s of the failover, and the IdP's rate limits must still count in Redis.
import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import {
  call,
  errorOf,
  type GatewayProcess,
  gatewayEnv,
  mailServiceToken,
  startGatewayProcess,
  startUpstream,
  type Upstream,
} from '../gateway/helpers.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from './database.ts';
import { signIn } from './oauth.ts';
import { type IdpProcess, startIdpProcess } from './processes.ts';

const BASE = 'https://mcp.redis-ha.test';
const APP_ID_URI = `${BASE}/mail/mcp`;
const SECRET = 'redis-ha-test-mail-shared-secret-0123456789abcdef';
/** The bound the product promises: every revocation enforced again within 5 s of a failover. */
export const BOUND_MS = 5000;
const PUBLISH_EVERY_MS = 50;
/** The register limit the test sets, counted per client address (X-Forwarded-For from a trusted 127.0.0.1). */
const REGISTER_LIMIT = 3;

export interface HaStack {
  db: TestDatabase;
  idp: IdpProcess;
  gateways: GatewayProcess[];
  upstream: Upstream;
  admin: SeededUser;
  adminToken: string;
  /** Another gateway on the same Redis settings (stopped with the stack). */
  startGateway(): Promise<GatewayProcess>;
  stop(): Promise<void>;
}

export async function startHaStack(o: {
  /** REDIS_URL of the IdP (a URL form). */
  idpRedisUrl: string;
  /** The gateways' Redis variables (the variables form, REDIS_URL unset). */
  gatewayRedisEnv: Record<string, string>;
}): Promise<HaStack> {
  const db = await createTestDatabase();
  const admin = await seedUser(db.pool);
  const upstream = await startUpstream();
  const idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: o.idpRedisUrl,
    env: {
      PLATFORM_ADMIN_EMAILS: admin.email,
      PLATFORM_TRUSTED_PROXIES: '127.0.0.1',
      PLATFORM_RATE_LIMITS: `register=${REGISTER_LIMIT}/600,token=100000/60,revoke=100000/60`,
    },
  });
  const gateways: GatewayProcess[] = [];
  const startGateway = async () => {
    const g = await startGatewayProcess(
      gatewayEnv(
        { base: BASE, services: { mail: upstream.url }, platform: idp, redisUrl: '' },
        { MAIL_MCP_SHARED_SECRET: SECRET, REDIS_URL: undefined, LOG_LEVEL: 'debug', ...o.gatewayRedisEnv },
      ),
    );
    gateways.push(g);
    return g;
  };
  await Promise.all([startGateway(), startGateway()]);
  const adminToken = (await signIn(idp.issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
  return {
    db,
    idp,
    gateways,
    upstream,
    admin,
    adminToken,
    startGateway,
    async stop() {
      await Promise.all(gateways.map((g) => g.stop()));
      await idp.stop();
      await upstream.close();
      await db.drop();
    },
  };
}

interface Revocation {
  token: string;
  jti: string;
  status: number;
  /** When the IdP answered (Date.now()). */
  at: number;
}

/** A service token (HS256, the mail service's own issuer) the gateways accept until its jti is revoked. */
const serviceToken = (jti: string = randomUUID()) =>
  mailServiceToken(SECRET, APP_ID_URI, { email: 'ha-user@redis-ha.test', jti });

async function revoke(stack: HaStack, token: string, jti: string): Promise<Revocation> {
  const res = await fetch(`${stack.idp.issuer}/admin/api/revoke-token`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ jti }),
    signal: AbortSignal.timeout(20_000),
  }).catch(() => undefined);
  await res?.text();
  return { token, jti, status: res?.status ?? 0, at: Date.now() };
}

const viaGateway = (g: GatewayProcess, token: string) => call(`${g.url}/mail/mcp`, { method: 'POST', token });

export interface FailoverHooks {
  /** A jti whose denylist key lands on the master about to be killed (any jti with one master). */
  jtiOnDoomedMaster(): Promise<string>;
  /**
   * Freezes the doomed master's replica and closes its replication link on the master (a frozen process still
   * receives into its socket buffer): what the master acknowledges now is never replicated.
   */
  freezeReplica(): Promise<void>;
  /** SIGKILLs the master, then lets the replica run again. */
  killMaster(): Promise<void>;
  /** Resolves once the replica has been promoted (Sentinel's +switch-master, Cluster's failover). */
  failedOver(): Promise<void>;
  /** Whether a key exists on the (new) topology. */
  exists(key: string): Promise<boolean>;
}

export interface FailoverReport {
  acknowledged: number;
  notAcknowledged: number;
  killToFailoverMs: number;
  /** From the promotion until every gateway refused every acknowledged revocation. */
  enforcedAfterMs: number;
}

export async function revocationsAcrossFailover(
  stack: HaStack,
  hooks: FailoverHooks,
): Promise<FailoverReport> {
  const done: Revocation[] = [];
  const inFlight = new Set<Promise<void>>();
  const fire = () => {
    const p = (async () => {
      const jti = randomUUID();
      done.push(await revoke(stack, await serviceToken(jti), jti));
    })();
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  };
  const control = await serviceToken();
  for (const g of stack.gateways) expect((await viaGateway(g, control)).status).toBe(200);

  const timer = setInterval(fire, PUBLISH_EVERY_MS);
  try {
    await new Promise((r) => setTimeout(r, 1000));
    // The revocation the old master acknowledges while its replica is frozen: lost from the keys by the
    // failover (asynchronous replication), restored only by the IdP's replay from Postgres.
    const jti = await hooks.jtiOnDoomedMaster();
    const token = await serviceToken(jti);
    await hooks.freezeReplica();
    const unreplicated = await revoke(stack, token, jti);
    expect(unreplicated.status).toBe(200);
    done.push(unreplicated);
    const killedAt = Date.now();
    await hooks.killMaster();
    await hooks.failedOver();
    const failedOverAt = Date.now();
    // A gateway that starts after the failover knows only what the keys say.
    const late = stack.startGateway();
    await new Promise((r) => setTimeout(r, 1000));
    clearInterval(timer);
    await late;
    await Promise.all(inFlight);

    const acknowledged = done.filter((r) => r.status === 200);
    const pending = new Set(
      stack.gateways.flatMap((g) => acknowledged.map((r) => ({ g, r, last: '', at: 0 }))),
    );
    while (pending.size > 0 && Date.now() - failedOverAt <= BOUND_MS) {
      await Promise.all(
        [...pending].map(async (p) => {
          const res = await viaGateway(p.g, p.r.token);
          if (res.status === 401 && errorOf(res).reason === 'token_revoked') pending.delete(p);
          // What the gateway last answered instead (CI once read 2 misses here with nothing to say which answer).
          else
            [p.last, p.at] = [
              `${res.status} ${res.status === 200 ? '' : JSON.stringify(res.json)}`,
              Date.now(),
            ];
        }),
      );
      if (pending.size > 0) await new Promise((r) => setTimeout(r, 100));
    }
    const enforcedAfterMs = Date.now() - failedOverAt;
    const missed = [...pending].map(
      (p) =>
        `${p.g.url} ${p.r.jti} (revoked at +${p.r.at - failedOverAt} ms; last answer ${p.last} at +${p.at - failedOverAt} ms)`,
    );
    if (missed.length > 0) {
      for (const g of stack.gateways) console.log(`gateway ${g.url}:\n${g.output()}`);
      console.log(`idp:\n${stack.idp.output()}`);
    }
    expect(missed, 'acknowledged revocations a gateway still accepts 5 s after the failover').toEqual([]);
    expect(enforcedAfterMs).toBeLessThanOrEqual(BOUND_MS + 1000);
    // The gateways still serve (their mirrors are current, not refusing everything) and say so.
    for (const g of stack.gateways) {
      expect((await viaGateway(g, control)).status).toBe(200);
      expect(await (await fetch(`${g.url}/health`)).json(), g.output()).toEqual({ status: 'ok' });
    }
    // The lost key is back in Redis (replayed from Postgres), and so is every acknowledged one.
    expect(await hooks.exists(`platform:deny:jti:${unreplicated.jti}`)).toBe(true);
    for (const r of acknowledged) expect(await hooks.exists(`platform:deny:jti:${r.jti}`)).toBe(true);
    return {
      acknowledged: acknowledged.length,
      notAcknowledged: done.length - acknowledged.length,
      killToFailoverMs: failedOverAt - killedAt,
      enforcedAfterMs,
    };
  } finally {
    clearInterval(timer);
  }
}

/**
 * After the failover: the IdP's per-address limit still refuses the request past it, and (once the IdP is on the
 * new master) counts in Redis again, not in a process's memory: tried from a fresh address until the counter
 * shows in Redis.
 */
export async function rateLimitsAfterFailover(
  stack: HaStack,
  hooks: Pick<FailoverHooks, 'exists'>,
): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (let n = 1; ; n++) {
    const address = `203.0.113.${n}`;
    const statuses: number[] = [];
    for (let i = 0; i <= REGISTER_LIMIT; i++) {
      const res = await fetch(`${stack.idp.issuer}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
        body: JSON.stringify({ client_name: 'ha', redirect_uris: ['http://127.0.0.1:9/cb'] }),
      });
      await res.text();
      statuses.push(res.status);
    }
    expect(statuses.slice(0, REGISTER_LIMIT).every((s) => s !== 429)).toBe(true);
    expect(statuses[REGISTER_LIMIT]).toBe(429);
    if (await hooks.exists(`platform:ratelimit:${stack.idp.issuer}:register:${address}`)) return;
    expect(Date.now(), 'the rate-limit counters never came back to Redis').toBeLessThan(deadline);
    await new Promise((r) => setTimeout(r, 250));
  }
}
