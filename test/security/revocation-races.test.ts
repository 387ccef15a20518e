// Attack (issue 17, "revocation wins every race"): the holder of a user's sign-ins keeps refreshing them in tight
// loops (or keeps exchanging codes) while an administrator revokes the user, one sign-in or a service. Measured
// before the fix: 15 of 20 refresh families survived revoke-user and kept calling tools. Through real processes
// (IdP, gateway, Postgres, Redis), each scenario 10 times: afterwards no family refreshes, and every access token
// any loop obtained is refused at the gateway with 401 token_revoked — 0 survivors.
import { createHash } from 'node:crypto';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { SeededUser } from '../helpers/database.ts';
import { answerDevice, exchangeCode, obtainCode, pollDevice, signIn, startDevice } from '../helpers/oauth.ts';
import {
  type Chain,
  grantedUser,
  refreshLoop,
  type SecurityStack,
  startSecurityStack,
  survivors,
  ungrant,
} from '../helpers/security-stack.ts';

const RUNS = 10;
const SCOPE = 'openid email mcp:mail mcp:deals';

let stack: SecurityStack;

beforeAll(async () => {
  stack = await startSecurityStack({
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_ENTITLEMENTS: 'managed' },
  });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A user granted mail and deals (managed entitlements). */
const victim = () => grantedUser(stack, ['mail', 'deals']);

async function chainsOf(u: SeededUser, n: number): Promise<Chain[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const t = await signIn(stack.idp.issuer, u.sessionToken, { scope: SCOPE });
      return { accessTokens: [t.access_token], latest: t.refresh_token, refreshes: 0 };
    }),
  );
}

/**
 * Runs every chain's refresh loop; once `landAfter` refreshes happened in all, `revoke()` lands mid-loop. The
 * loops stop on their own (refused) or `graceMs` after the revocation answered (the survivors).
 */
async function raceLoops(chains: Chain[], landAfter: number, revoke: () => Promise<void>, graceMs = 1500) {
  let stop = false;
  const loops = Promise.all(chains.map((c) => refreshLoop(stack.idp.issuer, c, () => stop)));
  const total = () => chains.reduce((n, c) => n + c.refreshes, 0);
  while (total() < landAfter) await sleep(2);
  await revoke();
  await Promise.race([loops, sleep(graceMs)]);
  stop = true;
  await loops;
  return total();
}

const familyOf = async (refreshToken: string) =>
  (
    await stack.db.pool.query<{ family_id: string }>(
      'SELECT family_id::text FROM platform.refresh_tokens WHERE token_hash = $1',
      [createHash('sha256').update(refreshToken).digest('base64url')],
    )
  ).rows[0]!.family_id;

const carries = (service: string) => (t: string) =>
  String(decodeJwt(t).scope).split(' ').includes(`mcp:${service}`);

/**
 * RUNS times, for a new victim: `prepare` readies the exchanges (codes, approved device codes), they all start and
 * revoke-user lands as soon as the first answers. Those refused answer invalid_grant; whatever tokens the others
 * got must all be dead afterwards.
 */
async function exchangesRaceRevokeUser(
  prepare: (
    u: SeededUser,
  ) => Promise<Array<() => Promise<{ status: number; json: Record<string, unknown> }>>>,
) {
  const report: string[] = [];
  for (let run = 0; run < RUNS; run++) {
    const u = await victim();
    const exchanges = await prepare(u);
    let first!: () => void;
    const firstDone = new Promise<void>((r) => (first = r));
    const answers = exchanges.map(async (exchange) => {
      const r = await exchange();
      first();
      return r;
    });
    await firstDone;
    expect((await stack.adminApi('POST', '/admin/api/revoke-user', { email: u.email })).status).toBe(200);
    const chains: Chain[] = [];
    for (const r of await Promise.all(answers)) {
      if (r.status === 200)
        chains.push({
          accessTokens: [r.json.access_token as string],
          latest: String(r.json.refresh_token),
          refreshes: 0,
        });
      else expect(r.json.error).toBe('invalid_grant');
    }
    const left = await survivors(stack, chains);
    report.push(`run ${run}: ${chains.length} issued before the revocation, ${left.length} survivors`);
    expect(left, report.join('\n')).toEqual([]);
  }
  console.log(report.join('\n'));
}

describe('revocation wins every race', () => {
  it('revoke-user while 20 sign-ins refresh in tight loops: 0 surviving families, every access token refused', async () => {
    const report: string[] = [];
    for (let run = 0; run < RUNS; run++) {
      const u = await victim();
      const chains = await chainsOf(u, 20);
      const refreshes = await raceLoops(chains, 200, async () => {
        const r = await stack.adminApi('POST', '/admin/api/revoke-user', { email: u.email });
        expect(r.status).toBe(200);
      });
      const left = await survivors(stack, chains);
      report.push(`run ${run}: ${refreshes} refreshes, ${left.length} survivors`);
      expect(left, report.join('\n')).toEqual([]);
    }
    console.log(report.join('\n'));
  }, 120_000);

  it('revoking sign-ins (admin revoke-sign-in) mid-loop: those families and all their access tokens are dead', async () => {
    for (let run = 0; run < RUNS; run++) {
      const u = await victim();
      const chains = await chainsOf(u, 10);
      const targets = chains.slice(0, 4);
      const ids = await Promise.all(targets.map((c) => familyOf(c.latest)));
      await raceLoops(
        chains,
        100,
        async () => {
          const answers = await Promise.all(
            ids.map((id) => stack.adminApi('DELETE', `/admin/api/sign-ins/${id}`)),
          );
          for (const a of answers) expect(a.status).toBe(200);
        },
        300,
      );
      expect(await survivors(stack, targets)).toEqual([]);
    }
  }, 120_000);

  it('an ungrant mid-loop: no access token that carries the service is accepted, later refreshes lack it', async () => {
    for (let run = 0; run < RUNS; run++) {
      const u = await victim();
      const chains = await chainsOf(u, 10);
      await raceLoops(chains, 100, () => ungrant(stack, 'mail', u.email), 300);
      // Refresh tokens stay valid (the client gets the narrowed scope); tokens carrying mail are all refused.
      expect(await survivors(stack, chains, { refreshes: 'kept', only: carries('mail') })).toEqual([]);
      for (const c of chains) expect(carries('mail')(c.accessTokens.at(-1)!)).toBe(false);
    }
  }, 120_000);

  it('an entity ungrant mid-loop: no access token that carries the entity is accepted, later refreshes lack it', async () => {
    const carriesDeal = (t: string) =>
      Object.hasOwn((decodeJwt(t).ent as object | undefined) ?? {}, 'deal:race');
    for (let run = 0; run < RUNS; run++) {
      const u = await victim();
      const g = { entity: 'deal:race', permission: 'write', email: u.email };
      expect((await stack.adminApi('POST', '/admin/api/entitlements', g)).status).toBe(200);
      const chains = await chainsOf(u, 10);
      const q = new URLSearchParams({ entity: 'deal:race', email: u.email });
      await raceLoops(
        chains,
        100,
        async () => {
          expect((await stack.adminApi('DELETE', `/admin/api/entitlements?${q}`)).status).toBe(200);
        },
        300,
      );
      expect(await survivors(stack, chains, { refreshes: 'kept', only: carriesDeal })).toEqual([]);
      for (const c of chains) expect(carriesDeal(c.accessTokens.at(-1)!)).toBe(false);
    }
  }, 120_000);

  it('revoke-user while 20 codes are being exchanged: no exchange yields a token any gateway accepts', async () => {
    await exchangesRaceRevokeUser(async (u) => {
      const codes = await Promise.all(
        Array.from({ length: 20 }, () =>
          obtainCode({ issuer: stack.idp.issuer, sessionToken: u.sessionToken, params: { scope: SCOPE } }),
        ),
      );
      return codes.map((c) => () => exchangeCode(stack.idp.issuer, c));
    });
  }, 120_000);

  it('revoke-user while approved device codes are being exchanged: no exchange yields a token any gateway accepts', async () => {
    await exchangesRaceRevokeUser(async (u) => {
      const devices = await Promise.all(
        Array.from({ length: 10 }, async () => {
          const d = await startDevice(stack.idp.issuer, { scope: SCOPE });
          const { answer } = await answerDevice(stack.idp.issuer, d, u.sessionToken);
          expect(answer?.status).toBe(200);
          return d;
        }),
      );
      return devices.map((d) => () => pollDevice(stack.idp.issuer, d.device_code));
    });
  }, 120_000);
});
