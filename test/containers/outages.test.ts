// Dependencies going away under the running stack:
// - Redis restarted with its data gone: a token revoked before stays refused throughout (the IdP replays its
//   durable revocations, the gateways keep their mirror), and a new revocation reaches both gateways within
//   100 ms of the IdP's answer (each gateway asked directly on the stack's network, measured and printed);
// - Postgres stopped for 10 s: the IdP answers 503 temporarily_unavailable, the tool servers degrade (a tool
//   error, never a 502 or a crash), and everything recovers with no container restarted.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postForm } from '../helpers/oauth.ts';
import { callTool } from './load.ts';
import {
  allHealthy,
  composeRun,
  docker,
  replicas,
  type SignedIn,
  signedInUser,
  stack,
  stackPool,
} from './support.ts';

const pool = stackPool();
afterAll(() => pool.end());
beforeAll(() => allHealthy());

const say = (line: string) => process.stdout.write(`[outages] ${line}\n`);
/** redis-cli as the operator's `admin` user (its password is the Redis container's REDISCLI_AUTH). */
const REDIS_ADMIN = ['redis-cli', '--no-auth-warning', '--user', 'admin'];

/** The gateway replicas' own addresses on the stack's network (no proxy in between). */
async function gatewayUrls(): Promise<string[]> {
  const ids = await replicas('gateway');
  return Promise.all(
    ids.map(async (id) => {
      // On the backend network (the gateway is on three; the Redis one is internal).
      const { stdout } = await docker([
        'inspect',
        '--format',
        `{{(index .NetworkSettings.Networks "${stack().project}_backend").IPAddress}}`,
        id,
      ]);
      return `http://${stdout.trim()}:3000`;
    }),
  );
}

/**
 * Whether a gateway still accepts the token: a GET on the MCP route is authenticated by the gateway and then
 * answered 405 by the tool server (cheap on both). The Host is the public one, as the proxy would send it.
 */
async function accepted(gatewayUrl: string, token: string): Promise<boolean> {
  // undici's request (not fetch) sends the Host header given, as the proxy would.
  const res = await request(`${gatewayUrl}/platform/mcp`, {
    headers: {
      authorization: `Bearer ${token}`,
      host: new URL(stack().baseUrl).host,
      accept: 'text/event-stream',
    },
    headersTimeout: 5000,
    bodyTimeout: 5000,
  });
  const text = await res.body.text();
  if (res.statusCode === 401 && text.includes('token_revoked')) return false;
  // Through authentication to the tool server, which has no event stream to offer: 405.
  if (res.statusCode === 405) return true;
  throw new Error(`unexpected answer from ${gatewayUrl}: ${res.statusCode} ${text.slice(0, 200)}`);
}

async function revoke(token: string): Promise<number> {
  const r = await postForm(`${stack().baseUrl}/oauth/revoke`, {
    token,
    token_type_hint: 'access_token',
    client_id: 'platform-cli',
  });
  expect(r.status).toBe(200);
  return performance.now();
}

async function startedAt(): Promise<Map<string, string>> {
  const ids = (
    await docker(['ps', '-q', '--filter', `label=com.docker.compose.project=${stack().project}`])
  ).stdout
    .split('\n')
    .filter(Boolean);
  const { stdout } = await docker([
    'inspect',
    '--format',
    '{{.Name}} {{.State.StartedAt}} {{.RestartCount}}',
    ...ids,
  ]);
  return new Map(
    stdout
      .trim()
      .split('\n')
      .map((l) => l.split(' ', 2) as [string, string]),
  );
}

describe('Redis restarted with its data gone', () => {
  let revoked: SignedIn;
  let fresh: SignedIn;
  beforeAll(async () => {
    [revoked, fresh] = [await signedInUser(pool), await signedInUser(pool)];
  });

  it('keeps a revoked token refused on both gateways, before, during and after', async () => {
    const gateways = await gatewayUrls();
    expect(gateways).toHaveLength(2);
    for (const g of gateways) expect(await accepted(g, revoked.accessToken)).toBe(true);
    await revoke(revoked.accessToken);
    for (const g of gateways) {
      const deadline = Date.now() + 2000;
      while (await accepted(g, revoked.accessToken)) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    const [redis] = await replicas('redis');
    // The stack's own Redis: emptied (the append-only file records the flush), then restarted.
    await docker(['exec', redis!, ...REDIS_ADMIN, 'FLUSHALL']);
    let watching = true;
    let acceptedOnce = '';
    const watch = (async () => {
      while (watching) {
        for (const g of gateways) {
          if (await accepted(g, revoked.accessToken).catch(() => false)) acceptedOnce = g;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    await docker(['restart', redis!]);
    await allHealthy();
    const { stdout: keys } = await docker([
      'exec',
      redis!,
      ...REDIS_ADMIN,
      '--scan',
      '--pattern',
      'platform:deny:*',
    ]);
    // Replayed by the IdP from Postgres once its connection came back.
    const deadline = Date.now() + 20_000;
    let replayed = keys.trim().split('\n').filter(Boolean).length;
    while (replayed === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      const r = await docker(['exec', redis!, ...REDIS_ADMIN, '--scan', '--pattern', 'platform:deny:*']);
      replayed = r.stdout.trim().split('\n').filter(Boolean).length;
    }
    await new Promise((r) => setTimeout(r, 3000));
    watching = false;
    await watch;
    say(`after the restart: ${replayed} denylist key(s) back in Redis`);
    expect(replayed).toBeGreaterThan(0);
    expect(acceptedOnce, 'a gateway accepted the revoked token around the Redis restart').toBe('');
    for (const g of gateways) expect(await accepted(g, revoked.accessToken)).toBe(false);
  }, 120_000);

  it('brings a new revocation to both gateways within 100 ms of the IdP answer', async () => {
    const gateways = await gatewayUrls();
    for (const g of gateways) expect(await accepted(g, fresh.accessToken)).toBe(true);
    // Both gateways are watched from before the revocation is sent; each lag is counted from the IdP's answer.
    let answeredAt = Number.POSITIVE_INFINITY;
    const giveUp = performance.now() + 10_000;
    const refusedAt = gateways.map(async (g) => {
      while (performance.now() < giveUp) {
        if (!(await accepted(g, fresh.accessToken))) return performance.now();
      }
      return Number.POSITIVE_INFINITY;
    });
    answeredAt = await revoke(fresh.accessToken);
    const lags = (await Promise.all(refusedAt)).map((t) => Math.max(0, t - answeredAt));
    say(
      `new revocation refused by the two gateways ${lags.map((l) => `${l.toFixed(1)} ms`).join(' and ')} after the IdP answered`,
    );
    for (const lag of lags) expect(lag).toBeLessThanOrEqual(100);
  });
});

describe('Postgres stopped for 10 s', () => {
  it('IdP 503 temporarily_unavailable, tools degrade (no 502), everything recovers without a restart', async () => {
    const user = await signedInUser(pool);
    const before = await startedAt();
    const [postgres] = await replicas('postgres');
    await docker(['stop', '-t', '10', postgres!]);
    const stoppedAt = Date.now();
    try {
      const refresh = await postForm(`${stack().baseUrl}/oauth/token`, {
        grant_type: 'refresh_token',
        refresh_token: user.refreshToken,
        client_id: 'platform-cli',
      });
      expect(refresh.status).toBe(503);
      expect(refresh.json).toMatchObject({ error: 'temporarily_unavailable' });
      const statuses: number[] = [];
      for (const tool of ['whoami'] as const) {
        const r = await callTool({
          baseUrl: stack().baseUrl,
          service: 'platform',
          token: user.accessToken,
          tool,
          args: {},
        });
        statuses.push(r.status);
        say(`whoami with Postgres down: ${r.status} ${r.ok ? 'ok (cached user)' : r.detail.slice(0, 160)}`);
      }
      const deal = await callTool({
        baseUrl: stack().baseUrl,
        service: 'deals',
        token: user.accessToken,
        tool: 'get_conflicts',
        args: { deal_id: 'any' },
      });
      say(`get_conflicts with Postgres down: ${deal.status} ${deal.detail.slice(0, 160)}`);
      expect(deal.status).toBe(200);
      expect(deal.ok).toBe(false);
      expect(deal.detail).toContain('database_unavailable');
      for (const s of statuses) expect(s).not.toBe(502);
      const wait = 10_000 - (Date.now() - stoppedAt);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    } finally {
      await docker(['start', postgres!]);
    }
    await allHealthy();
    // Recovered: the same refresh token works (no rotation happened while the database was away).
    const deadline = Date.now() + 30_000;
    for (;;) {
      const r = await postForm(`${stack().baseUrl}/oauth/token`, {
        grant_type: 'refresh_token',
        refresh_token: user.refreshToken,
        client_id: 'platform-cli',
      });
      if (r.status === 200) break;
      expect(Date.now(), `refresh after recovery: ${r.status} ${r.text}`).toBeLessThan(deadline);
      await new Promise((res) => setTimeout(res, 500));
    }
    const deal = await callTool({
      baseUrl: stack().baseUrl,
      service: 'deals',
      token: user.accessToken,
      tool: 'get_conflicts',
      args: { deal_id: 'any' },
    });
    expect(deal.ok, deal.detail).toBe(true);
    const after = await startedAt();
    for (const [name, started] of before) {
      if (/postgres/.test(name)) continue;
      expect(after.get(name), `${name} was not restarted`).toBe(started);
    }
    await composeRun(['ps']);
  }, 120_000);
});
