// Attack: the sibling rule of concurrent refresh (docs/idp.md § Concurrent refresh) must not reopen issue 17's
// "revocation wins every race". The holder of a user's sign-ins refreshes each of them as two processes at once
// (every step presents the current token twice, so half the rotations are siblings, issued on the slow path)
// while an administrator revokes the user. Through real processes (IdP, gateway, Postgres, Redis), 5 times:
// afterwards no sibling refreshes, and every access token any process obtained is refused at the gateway with
// 401 token_revoked — 0 survivors.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { seedUser } from '../helpers/database.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { type Chain, type SecurityStack, startSecurityStack, survivors } from '../helpers/security-stack.ts';

const RUNS = 5;
const FAMILIES = 10;

let stack: SecurityStack;

beforeAll(async () => {
  stack = await startSecurityStack({ redisUrl: inject('redisUrl') });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Two processes on one sign-in: each step both present the current token; every token obtained is a chain. */
async function twoProcesses(start: string, out: Chain[], stop: () => boolean): Promise<void> {
  let current = start;
  while (!stop()) {
    const answers = await Promise.all([
      refresh(stack.idp.issuer, current),
      refresh(stack.idp.issuer, current),
    ]);
    const ok = answers.filter((r) => r.status === 200);
    for (const r of ok) {
      out.push({
        accessTokens: [r.json.access_token as string],
        latest: r.json.refresh_token as string,
        refreshes: 1,
      });
    }
    if (ok.length === 0) return;
    current = ok[0]!.json.refresh_token as string;
  }
}

describe('revocation wins every race against sibling rotations', () => {
  it(`revoke-user while ${FAMILIES} sign-ins refresh as two processes each: 0 survivors`, async () => {
    const report: string[] = [];
    for (let run = 0; run < RUNS; run++) {
      const u = await seedUser(stack.db.pool);
      const starts = await Promise.all(
        Array.from({ length: FAMILIES }, () =>
          signIn(stack.idp.issuer, u.sessionToken, { scope: 'openid email mcp:mail' }),
        ),
      );
      const chains: Chain[] = starts.map((t) => ({
        accessTokens: [t.access_token],
        latest: t.refresh_token,
        refreshes: 0,
      }));
      let stop = false;
      const loops = Promise.all(starts.map((t) => twoProcesses(t.refresh_token, chains, () => stop)));
      while (chains.length < FAMILIES + 100) await sleep(2);
      const r = await stack.adminApi('POST', '/admin/api/revoke-user', { email: u.email });
      // CI once read a 500 here, without the reason: the answer and the IdP's error lines say it next time.
      const errors = () =>
        stack.idp
          .logs()
          .filter((l) => Number(l.level) >= 50)
          .map((l) => JSON.stringify(l))
          .join('\n');
      expect(r.status, `${JSON.stringify(r.json)}\n${errors()}`).toBe(200);
      await Promise.race([loops, sleep(1500)]);
      stop = true;
      await loops;
      const left = await survivors(stack, chains);
      report.push(`run ${run}: ${chains.length - FAMILIES} tokens issued, ${left.length} survivors`);
      expect(left).toEqual([]);
    }
    console.log(report.join('\n'));
  }, 300_000);
});
