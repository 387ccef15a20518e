// Postgres high availability through one write endpoint (docs/deploy.md § Postgres high availability): the
// shipped Patroni + etcd + HAProxy files (deploy/postgres-ha/) run two real nodes with synchronous replication,
// and every component's DATABASE_URL names HAProxy. Under refresh-grant load on a real IdP and deal-writing tool
// calls through a real gateway and deals tool server, the primary is killed (Patroni and PostgreSQL, SIGKILL) and
// Patroni promotes the standby: no acknowledged refresh, audit row or deal write is lost, the only failures are
// 503s inside the switch, and every component recovers without a restart. First, the rule the recovery rests on:
// a real standby's 25006 is "unavailable", and the connection that got it never goes back to the pool; and a
// planned switchover (Patroni demotes the primary) under the same load, which must leave the same guarantees.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { decodeJwt } from 'jose';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MIGRATION_SETS } from '../../cli/migrations.ts';
import { createPool, isDatabaseUnavailable } from '../../lib/db.ts';
import { createLogger } from '../../lib/logger.ts';
import { migrate } from '../../lib/migrate.ts';
import { seedUser } from '../helpers/database.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { havePatroni, type PatroniCluster, startPatroniCluster } from '../helpers/patroni-cluster.ts';
import {
  freePort,
  type GatewayProcess,
  type IdpProcess,
  type RunningProcess,
  startGatewayProcess,
  startIdpProcess,
  startPlatform,
} from '../helpers/processes.ts';
import { startTcpRelay } from '../helpers/tcp-relay.ts';
import { IDENTITY_SECRET, toolKey } from '../tools/helpers.ts';

const SCOPE = 'openid email mcp:deals';
const CHAINS = 4;
const WRITERS = 2;
/** Load before the kill, and after the switch once every load loop has succeeded again. */
const STEADY_MS = 4000;
/** The longest switch accepted: Patroni's ttl (10 s here) + loop_wait + HAProxy's two failed checks + slack. */
const SWITCH_BOUND_MS = 25_000;

const log = createLogger({ name: 'postgres-failover-test', level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let cluster: PatroniCluster;
let admin: pg.Pool;
let idp: IdpProcess;
let deals: RunningProcess;
let gateway: GatewayProcess;

describe.skipIf(!havePatroni())('Postgres behind its write endpoint', () => {
  beforeAll(async () => {
    cluster = await startPatroniCluster({ ttl: 10 });
    admin = new pg.Pool({ connectionString: cluster.url, max: 3 });
    admin.on('error', () => {});
    await admin.query(await readFile(new URL('../../idp/authjs/schema.sql', import.meta.url), 'utf8'));
    await migrate(admin, MIGRATION_SETS);
    const gatewayPort = await freePort();
    const baseUrl = `http://127.0.0.1:${gatewayPort}`;
    idp = await startIdpProcess({
      databaseUrl: cluster.url,
      redisUrl: inject('redisUrl'),
      // Every load loop refreshes from 127.0.0.1: the per-address limit would otherwise answer 429.
      env: { PUBLIC_BASE_URL: baseUrl, PLATFORM_SERVICES: 'deals', PLATFORM_RATE_LIMITS: 'token=1000000/60' },
    });
    const dealsPort = await freePort();
    deals = startPlatform(['tool', 'deals'], {
      DATABASE_URL: cluster.url,
      TOOL_IDENTITY_KEY: toolKey('deals'),
      DEALS_MCP_PORT: String(dealsPort),
    });
    await deals.waitFor(/deals tool server listening/, 60_000);
    gateway = await startGatewayProcess(
      {
        PUBLIC_BASE_URL: baseUrl,
        GATEWAY_SERVICES: 'deals',
        DEALS_MCP_UPSTREAM: `http://127.0.0.1:${dealsPort}`,
        PLATFORM_ISSUER: idp.issuer,
        PLATFORM_AUDIENCE: idp.audience,
        REDIS_URL: inject('redisUrl'),
        GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
      },
      gatewayPort,
    );
  }, 180_000);

  afterAll(async () => {
    await Promise.all([gateway?.stop(), deals?.stop(), idp?.stop()]);
    await admin?.end().catch(() => {});
    await cluster?.destroy();
  });

  it('a real standby answers a write with 25006: unavailable, and that connection never serves again', async () => {
    const standby = cluster.nodes[1]!;
    // An endpoint that still points at the standby (HAProxy between two checks), then moves to the primary.
    const relay = await startTcpRelay(standby.pgPort);
    const pool = createPool(relay.urlFor(cluster.url), log, { max: 1 });
    try {
      const client = await pool.connect();
      await client.query('BEGIN');
      const err = await client.query('CREATE TABLE standby_probe (n int)').catch((e: unknown) => e);
      expect((err as { code?: string }).code).toBe('25006');
      expect(isDatabaseUnavailable(err)).toBe(true);
      await client.query('ROLLBACK').catch(() => {});
      // Released as a transaction helper releases it, without an error: the pool must still not keep it.
      client.release();
      const primary = (await cluster.primary())!;
      relay.retarget(primary.pgPort);
      // max: 1, so a kept connection would be the one answering here (still the standby: in recovery).
      const r = await pool.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
      expect(r.rows[0]!.r).toBe(false);
      await pool.query('CREATE TABLE standby_probe (n int)');
      await pool.query('DROP TABLE standby_probe');
    } finally {
      await pool.end();
      await relay.down();
    }
  });

  /**
   * The load: CHAINS refresh-token chains on the IdP and WRITERS MCP clients writing deal proposals through the
   * gateway, each in a loop until stopped, every answer recorded.
   */
  async function startLoad() {
    interface Outcome {
      kind: 'refresh' | 'write';
      who: number;
      started: number;
      ended: number;
      /** 200, 503, or what else came back. */
      status: number;
      detail?: string;
    }
    const outcomes: Outcome[] = [];
    /** Access-token ids of every acknowledged refresh: each has its issuance_audit row. */
    const issued: string[] = [];
    /** Every acknowledged deal write: its artifact and event rows. */
    const written: Array<{ artifactId: string; dealId: string }> = [];
    const current: string[] = [];
    let stop = false;

    const users = await Promise.all(Array.from({ length: CHAINS + WRITERS }, () => seedUser(admin)));
    const tokens = await Promise.all(users.map((u) => signIn(idp.issuer, u.sessionToken, { scope: SCOPE })));

    const refreshChain = async (who: number) => {
      current[who] = tokens[who]!.refresh_token;
      while (!stop) {
        const started = performance.now();
        const r = await refresh(idp.issuer, current[who]!).catch((e: Error) => ({
          status: 0,
          json: {} as Record<string, unknown>,
          text: e.message,
        }));
        const o: Outcome = { kind: 'refresh', who, started, ended: performance.now(), status: r.status };
        outcomes.push(o);
        if (r.status === 200) {
          issued.push(decodeJwt(r.json.access_token as string).jti!);
          current[who] = r.json.refresh_token as string;
        } else {
          // A 503 is retried with the same token (the retry window takes it if it did rotate after all).
          o.detail = r.text;
          await sleep(100);
        }
        await sleep(20);
      }
    };

    const dealWriter = async (who: number) => {
      const token = tokens[CHAINS + who]!.access_token;
      let client: Client | undefined;
      let pending: { deal_id: string; idempotency_key: string } | undefined;
      while (!stop) {
        const started = performance.now();
        const o: Outcome = { kind: 'write', who, started, ended: 0, status: 0 };
        // An unanswered write is retried with its idempotency key: stored once whatever happened to the first.
        pending ??= { deal_id: `deal-${randomUUID()}`, idempotency_key: randomUUID() };
        try {
          if (!client) {
            const c = new Client({ name: 'pg-failover', version: '1.0.0' });
            await c.connect(
              new StreamableHTTPClientTransport(new URL(`${gateway.url}/deals/mcp`), {
                requestInit: { headers: { authorization: `Bearer ${token}` } },
              }),
            );
            client = c;
          }
          const r = (await client.callTool({
            name: 'propose_deal_closure',
            arguments: {
              ...pending,
              metrics: [{ name: 'arr', value: 100 + who, source_file: 'model.xlsx', location: 'B2' }],
              citations: [],
            },
          })) as {
            isError?: boolean;
            structuredContent?: { artifact_id: string };
            content?: Array<{ text: string }>;
          };
          if (r.isError) {
            const body = JSON.parse(r.content?.[0]?.text ?? '{}') as {
              error?: { status?: number; code?: string };
            };
            o.status = body.error?.status ?? -1;
            o.detail = `${body.error?.code}`;
          } else {
            o.status = 200;
            written.push({ artifactId: r.structuredContent!.artifact_id, dealId: pending.deal_id });
            pending = undefined;
          }
        } catch (err) {
          o.status = -1;
          o.detail = (err as Error).message;
          await client?.close().catch(() => {});
          client = undefined;
        }
        o.ended = performance.now();
        outcomes.push(o);
        await sleep(o.status === 200 ? 20 : 100);
      }
      await client?.close().catch(() => {});
    };

    const loops = [
      ...Array.from({ length: CHAINS }, (_, i) => refreshChain(i)),
      ...Array.from({ length: WRITERS }, (_, i) => dealWriter(i)),
    ];
    return {
      outcomes,
      issued,
      written,
      current,
      /** True once every loop has had a success that started after `since`. */
      recoveredSince: (since: number) =>
        [...Array(CHAINS).keys()].every((w) =>
          outcomes.some((o) => o.kind === 'refresh' && o.who === w && o.started > since && o.status === 200),
        ) &&
        [...Array(WRITERS).keys()].every((w) =>
          outcomes.some((o) => o.kind === 'write' && o.who === w && o.started > since && o.status === 200),
        ),
      async stop() {
        stop = true;
        await Promise.all(loops);
      },
    };
  }

  type Load = Awaited<ReturnType<typeof startLoad>>;

  /**
   * What a switch that began at `at` must leave: only 503s, all inside the switch, every request after it a
   * success; on the new primary the audit row of every acknowledged refresh and the rows of every
   * acknowledged deal write; each chain's newest refresh token still good; the same processes, none of
   * which logged an unexpected error. Returns the summary it printed.
   */
  async function expectSurvived(load: Load, name: string, at: number, recoveredAt: number) {
    const { outcomes } = load;
    const before = outcomes.filter((o) => o.ended < at);
    const failures = outcomes.filter((o) => o.status !== 200);
    const summary = {
      requests: outcomes.length,
      before: before.length,
      byStatus: Object.fromEntries(
        [...new Set(outcomes.map((o) => `${o.kind} ${o.status}`))].map((k) => [
          k,
          outcomes.filter((o) => `${o.kind} ${o.status}` === k).length,
        ]),
      ),
      recoveredMs: Math.round(recoveredAt - at),
      lastFailureMs: failures.length ? Math.round(Math.max(...failures.map((o) => o.ended)) - at) : 0,
      /** Statements a standby refused, as the components logged them (each answered 503 or retried). */
      readOnlyRefusals: [idp, deals].reduce(
        (n, p) => n + (p.output().match(/read-only transaction/g)?.length ?? 0),
        0,
      ),
      otherFailures: failures.filter((o) => o.status !== 503).map((o) => `${o.kind} ${o.status} ${o.detail}`),
    };
    console.log(`postgres ${name}: ${JSON.stringify(summary)}`);

    expect(before.length).toBeGreaterThan(CHAINS * 5);
    expect(before.every((o) => o.status === 200)).toBe(true);
    // The only failures are 503s (temporarily_unavailable / database_unavailable), all inside the switch.
    expect(summary.otherFailures).toEqual([]);
    for (const f of failures) {
      expect(f.ended).toBeGreaterThan(at);
      expect(f.started - at).toBeLessThan(SWITCH_BOUND_MS);
    }
    expect(recoveredAt - at).toBeLessThan(SWITCH_BOUND_MS);
    const after = outcomes.filter((o) => o.started > recoveredAt + 1000);
    expect(after.length).toBeGreaterThan(0);
    expect(after.filter((o) => o.status !== 200)).toEqual([]);

    // Nothing acknowledged is lost: read on the primary itself, not through the endpoint.
    const primary = (await cluster.primary())!;
    const direct = new pg.Client({ connectionString: primary.url });
    await direct.connect();
    try {
      expect((await direct.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r')).rows[0]!.r).toBe(false);
      const audited = await direct.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM platform.issuance_audit WHERE jti = ANY($1::uuid[])',
        [load.issued],
      );
      expect(audited.rows[0]!.n).toBe(load.issued.length);
      const stored = await direct.query<{ n: number; events: number }>(
        `SELECT count(*)::int AS n,
                (SELECT count(*)::int FROM platform.artifact_event e
                  WHERE e.artifact_id = ANY($1::uuid[]) AND e.op = 'propose') AS events
           FROM platform.deal_artifacts a WHERE a.artifact_id = ANY($1::uuid[])`,
        [load.written.map((w) => w.artifactId)],
      );
      expect(stored.rows[0]).toEqual({ n: load.written.length, events: load.written.length });
    } finally {
      await direct.end();
    }
    // Each chain's newest refresh token, acknowledged after the switch, works: so did every one before it.
    for (const t of load.current) expect((await refresh(idp.issuer, t)).status).toBe(200);

    expect([idp.child.pid, deals.child.pid, gateway.child.pid]).toEqual(pids);
    for (const p of [idp, deals, gateway]) {
      expect(p.child.exitCode).toBeNull();
      expect(p.output()).not.toMatch(/unexpected error|tool failed|uncaught/i);
    }
  }

  /** Waits until `name` leads, then until every load loop has succeeded again since `at`. */
  async function awaitSwitch(load: Load, name: string, at: number): Promise<number> {
    const deadline = at + SWITCH_BOUND_MS + 30_000;
    while (performance.now() < deadline && (await cluster.primary())?.name !== name) await sleep(250);
    expect((await cluster.primary())?.name, cluster.logs()).toBe(name);
    while (performance.now() < deadline && !load.recoveredSince(at)) await sleep(250);
    return performance.now();
  }

  let pids: Array<number | undefined>;

  it('a planned switchover under load: a few 503s, no 500s, nothing acknowledged lost, no restart', async () => {
    pids = [idp.child.pid, deals.child.pid, gateway.child.pid];
    expect((await cluster.primary())?.name).toBe('pg1');
    const load = await startLoad();
    await sleep(STEADY_MS);
    const at = performance.now();
    const r = await fetch(`http://127.0.0.1:${cluster.nodes[0]!.restPort}/switchover`, {
      method: 'POST',
      body: JSON.stringify({ leader: 'pg1', candidate: 'pg2' }),
    });
    expect(r.status, await r.text()).toBe(200);
    const recoveredAt = await awaitSwitch(load, 'pg2', at);
    await sleep(STEADY_MS);
    await load.stop();
    await expectSurvived(load, 'switchover', at, recoveredAt);
    // pg1 follows pg2 as its synchronous standby again before the next test takes pg2 away.
    const end = performance.now() + 60_000;
    while (performance.now() < end) {
      if (
        (await fetch(`http://127.0.0.1:${cluster.nodes[0]!.restPort}/sync`).catch(() => undefined))
          ?.status === 200
      )
        break;
      await sleep(250);
    }
  });

  it('the primary is killed under refresh and deal-write load: nothing acknowledged is lost, 503s only during the switch, no restart', async () => {
    const [victim, heir] = [cluster.nodes[1]!, cluster.nodes[0]!];
    expect((await cluster.primary())?.name).toBe(victim.name);
    const load = await startLoad();
    await sleep(STEADY_MS);
    const at = performance.now();
    victim.kill();
    // Patroni promotes the synchronous standby once the leader key expires; HAProxy follows its /primary.
    const recoveredAt = await awaitSwitch(load, heir.name, at);
    await sleep(STEADY_MS);
    await load.stop();
    await expectSurvived(load, 'failover', at, recoveredAt);
  });
});
