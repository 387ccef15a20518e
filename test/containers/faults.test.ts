// Fault runs: under a bounded load of stateless `tools/call` through the proxy (20 req/s for 20 s, 127.0.0.1
// only), one replica of the gateway, of the deals tool server and of the IdP (with token refreshes in flight)
// is stopped gracefully (`docker stop`: no answer may be ≥ 500) or killed (`docker kill`, SIGKILL: only
// requests in flight at that instant may fail, none sent after it). Either way no write is lost: every
// proposal the client saw succeed is stored once, and a retry of each failed one under its idempotency key
// leaves exactly one row.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postForm } from '../helpers/oauth.ts';
import { around, type CallOutcome, callTool, proposal, runLoad, summary } from './load.ts';
import { allHealthy, docker, replicas, type SignedIn, signedInUser, stack, stackPool } from './support.ts';

const RATE = 20;
const SECONDS = 20;
const FAULT_AT_MS = 6000;

const pool = stackPool();
let user: SignedIn;
beforeAll(async () => {
  user = await signedInUser(pool);
  await allHealthy();
});
afterAll(() => pool.end());

const say = (line: string) => process.stdout.write(`[faults] ${line}\n`);

/** Stored proposals per idempotency key for this run's deal. */
async function rowsPerKey(dealId: string): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ key: string; n: number }>(
    `SELECT detail->>'idempotency_key' AS key, count(*)::int AS n FROM platform.artifact_event
      WHERE op = 'propose' AND deal_id = $1 GROUP BY 1`,
    [dealId],
  );
  return new Map(rows.map((r) => [r.key, r.n]));
}

/** Refresh chains hitting the IdP replicas through the proxy while the load runs; a failed one is retried with
 * the same refresh token (the IdP's retry grace), as a client would. */
function refreshLoop(stopAt: number, chains: number): Promise<CallOutcome[]> {
  const one = async (refreshToken: string): Promise<CallOutcome[]> => {
    const out: CallOutcome[] = [];
    let current = refreshToken;
    while (performance.now() < stopAt) {
      const start = performance.now();
      let status = 0;
      let detail = '';
      try {
        const r = await postForm(`${stack().baseUrl}/oauth/token`, {
          grant_type: 'refresh_token',
          refresh_token: current,
          client_id: 'platform-cli',
        });
        status = r.status;
        if (r.status === 200) current = (r.json as { refresh_token: string }).refresh_token;
        else detail = r.text.slice(0, 200);
      } catch (err) {
        detail = (err as Error).message;
      }
      out.push({ start, end: performance.now(), status, ok: status === 200, detail, key: '' });
      await new Promise((r) => setTimeout(r, 150));
    }
    return out;
  };
  return Promise.all(
    Array.from({ length: chains }, async () => one((await signedInUser(pool)).refreshToken)),
  ).then((all) => all.flat());
}

const TARGETS = [
  { service: 'gateway', label: 'gateway' },
  { service: 'tool-deals', label: 'deals tool server' },
  { service: 'idp', label: 'IdP' },
] as const;

describe.each(TARGETS)('one $label replica', ({ service }) => {
  for (const mode of ['stop', 'kill'] as const) {
    it(`docker ${mode} under load`, async () => {
      const [victim, survivor] = await replicas(service);
      expect(victim, `${service} has two replicas`).toBeDefined();
      expect(survivor).toBeDefined();
      const dealId = `fault-${service}-${mode}-${randomBytes(3).toString('hex')}`;
      // The fault's instant is a window: from sending `docker kill` to its return, which comes after the
      // signal was delivered. Calls overlapping it were in flight at the kill; calls sent after it must not fail.
      let issued = Number.POSITIVE_INFINITY;
      let instant = Number.POSITIVE_INFINITY;
      let refreshes: Promise<CallOutcome[]> | undefined;
      const run = await runLoad({
        rate: RATE,
        seconds: SECONDS,
        call: () =>
          callTool({
            baseUrl: stack().baseUrl,
            service: 'deals',
            token: user.accessToken,
            tool: 'propose_deal_closure',
            ...(() => {
              const args = proposal(dealId);
              return { args, key: String(args.idempotency_key) };
            })(),
          }),
        async during(t0) {
          if (service === 'idp') refreshes = refreshLoop(t0 + SECONDS * 1000, 3);
          await new Promise((r) => setTimeout(r, FAULT_AT_MS));
          issued = performance.now();
          if (mode === 'stop') instant = issued;
          await docker(mode === 'stop' ? ['stop', '-t', '20', victim!] : ['kill', victim!]);
          if (mode === 'kill') instant = performance.now();
        },
      });
      const refreshed = (await refreshes) ?? [];
      // Back to two replicas before anything else runs.
      await docker(['start', victim!]);
      await allHealthy();

      const { after } = around(run.outcomes, instant);
      const inFlight = run.outcomes.filter((c) => c.start <= instant && c.end >= issued);
      const failed = run.outcomes.filter((c) => !c.ok);
      const rps = (run.outcomes.length / SECONDS).toFixed(1);
      say(
        `${mode} ${service}: ${run.outcomes.length} calls (${rps}/s) — ${summary(run.outcomes)}; in flight at the ${mode}: ${inFlight.length} (failed ${inFlight.filter((c) => !c.ok).length}); failed after it: ${after.filter((c) => !c.ok).length}` +
          (refreshed.length > 0 ? `; refreshes: ${summary(refreshed)}` : ''),
      );
      for (const c of failed.slice(0, 5)) say(`  failed: ${c.status} ${c.detail}`);

      // Every failed proposal retried under its own key, once the replica is back.
      for (const c of failed) {
        const retry = await callTool({
          baseUrl: stack().baseUrl,
          service: 'deals',
          token: user.accessToken,
          tool: 'propose_deal_closure',
          args: proposal(dealId, c.key),
          key: c.key,
        });
        expect(retry.ok, `retry of ${c.key}: ${retry.status} ${retry.detail}`).toBe(true);
      }
      const rows = await rowsPerKey(dealId);
      const keys = run.outcomes.map((c) => c.key);
      const missing = keys.filter((k) => rows.get(k) !== 1);
      expect(missing, 'every proposal stored exactly once').toEqual([]);
      expect([...rows.values()].reduce((a, b) => a + b, 0)).toBe(keys.length);

      if (mode === 'stop') {
        expect(run.outcomes.filter((c) => c.status >= 500 || c.status === 0)).toEqual([]);
        expect(refreshed.filter((c) => c.status >= 500 || c.status === 0)).toEqual([]);
      } else {
        expect(after.filter((c) => !c.ok)).toEqual([]);
        expect(refreshed.filter((c) => c.start > instant && !c.ok)).toEqual([]);
      }
      expect(run.outcomes.length).toBe(RATE * SECONDS);
    }, 240_000);
  }
});
