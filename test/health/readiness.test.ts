// /health/live and /health/ready on the IdP, the gateway and a tool server, each a real process on a Postgres and
// a Redis of the test's own (the machine's shared ones are never stopped): readiness says 503 and names what is
// missing while it is away, 200 again when it is back; liveness never changes.
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATION_SETS } from '../../cli/migrations.ts';
import { migrate } from '../../lib/migrate.ts';
import { IDENTITY_SECRET, startGatewayProcess } from '../gateway/helpers.ts';
import {
  freePort,
  type GatewayProcess,
  type IdpProcess,
  type RunningProcess,
  startIdpProcess,
  startPlatform,
} from '../helpers/processes.ts';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../helpers/throwaway-postgres.ts';
import { startThrowawayRedis, type ThrowawayRedis } from '../helpers/throwaway-redis.ts';
import { toolKey } from '../tools/helpers.ts';

let pgServer: ThrowawayPostgres;
let redis: ThrowawayRedis;
let idp: IdpProcess;
let deals: RunningProcess & { url?: string };
let dealsUrl: string;
let gateway: GatewayProcess;
let orphan: GatewayProcess;

beforeAll(async () => {
  [pgServer, redis] = await Promise.all([startThrowawayPostgres(), startThrowawayRedis()]);
  const pool = new pg.Pool({ connectionString: pgServer.url, max: 2 });
  await pool.query(await readFile(new URL('../../idp/authjs/schema.sql', import.meta.url), 'utf8'));
  await migrate(pool, MIGRATION_SETS);
  await pool.end();
  const dealsPort = await freePort();
  dealsUrl = `http://127.0.0.1:${dealsPort}`;
  deals = startPlatform(['tool', 'deals'], {
    DATABASE_URL: pgServer.url,
    TOOL_IDENTITY_KEY: toolKey('deals'),
    DEALS_MCP_PORT: String(dealsPort),
  });
  [idp] = await Promise.all([
    startIdpProcess({ databaseUrl: pgServer.url, redisUrl: redis.url }),
    deals.waitFor(/deals tool server listening/, 60_000),
  ]);
  const env = {
    PUBLIC_BASE_URL: 'https://mcp.health.test',
    GATEWAY_SERVICES: 'deals',
    DEALS_MCP_UPSTREAM: dealsUrl,
    REDIS_URL: redis.url,
    GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
  };
  [gateway, orphan] = await Promise.all([
    startGatewayProcess({ ...env, PLATFORM_ISSUER: idp.issuer, PLATFORM_AUDIENCE: idp.audience }),
    // An issuer whose key set cannot be fetched: never ready.
    startGatewayProcess({
      ...env,
      PLATFORM_ISSUER: 'http://127.0.0.1:9/nowhere',
      PLATFORM_JWKS_URL: 'http://127.0.0.1:9/jwks.json',
      PLATFORM_AUDIENCE: idp.audience,
    }),
  ]);
}, 180_000);

afterAll(async () => {
  await Promise.all([gateway?.stop(), orphan?.stop(), deals?.stop(), idp?.stop()]);
  await redis?.stop();
  pgServer?.destroy();
});

async function probe(base: string, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${base}${path}`);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

const servers = () => ({ idp: idp.url, gateway: gateway.url, deals: dealsUrl });

/** Polls until /health/ready of `base` answers `status` (the process notices an outage on its own schedule). */
async function readyBecomes(base: string, status: number): Promise<Record<string, unknown>> {
  let last: { status: number; body: Record<string, unknown> } | undefined;
  await expect
    .poll(
      async () => {
        last = await probe(base, '/health/ready');
        return last.status;
      },
      { timeout: 20_000, interval: 250 },
    )
    .toBe(status);
  return last!.body;
}

async function allLive(): Promise<void> {
  for (const base of Object.values(servers())) {
    const live = await probe(base, '/health/live');
    expect(live.status).toBe(200);
    expect(live.body.status).toBe('live');
  }
}

describe('readiness', () => {
  it('is 200 on every server while everything answers', async () => {
    for (const base of Object.values(servers())) {
      const body = await readyBecomes(base, 200);
      expect(body.status).toBe('ready');
    }
    expect((await probe(gateway.url, '/health/ready')).body.checks).toEqual({ redis: 'ok', jwks: 'ok' });
    expect((await probe(idp.url, '/health/ready')).body.checks).toEqual({ postgres: 'ok', redis: 'ok' });
    expect((await probe(dealsUrl, '/health/ready')).body.checks).toEqual({ postgres: 'ok' });
    await allLive();
  });

  it('names redis at the IdP and the gateway while Redis is away, and recovers', async () => {
    await redis.stop();
    for (const base of [idp.url, gateway.url]) {
      const body = await readyBecomes(base, 503);
      expect(body.status).toBe('not_ready');
      expect(body.missing).toEqual(['redis']);
    }
    // The tool server does not use Redis.
    expect((await probe(dealsUrl, '/health/ready')).status).toBe(200);
    await allLive();
    await redis.start();
    for (const base of [idp.url, gateway.url]) await readyBecomes(base, 200);
  });

  it('names postgres at the IdP and the tool server while Postgres is away, and recovers', async () => {
    pgServer.stop();
    for (const base of [idp.url, dealsUrl]) {
      const body = await readyBecomes(base, 503);
      expect(body.missing).toEqual(['postgres']);
    }
    expect((await probe(gateway.url, '/health/ready')).status).toBe(200);
    await allLive();
    pgServer.start();
    for (const base of [idp.url, dealsUrl]) await readyBecomes(base, 200);
  });

  it('names jwks at a gateway that never obtained its issuer key set', async () => {
    const body = await readyBecomes(orphan.url, 503);
    expect(body.missing).toEqual(['jwks']);
    expect((await probe(orphan.url, '/health/live')).status).toBe(200);
  });
});
