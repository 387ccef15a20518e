// Red team: "a revocation the old master acknowledged and never replicated stays lost" — at a failover the IdP
// must write the denylist again (the promoted replica may lack the last revocations), whatever the restored
// marker says, because the old master replicated the marker. When that forced replay cannot be made at once (the
// replica not yet writable, a check already running), it must still be made: a later check that finds the
// marker would otherwise skip it, and a gateway started after the failover would never see the revocation.
// Real redis-server of the test's own; a replica of an unreachable master refuses writes (READONLY) like a
// replica Sentinel has not promoted yet.
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { keepDenylistRestored, RESTORE_CHECK_MS } from '../../idp/revocation.ts';
import { createLogger } from '../../lib/logger.ts';
import { revocationsRestoredKey } from '../../lib/revocation.ts';
import { freePort } from '../helpers/processes.ts';
import { startThrowawayRedis, type ThrowawayRedis } from '../helpers/throwaway-redis.ts';

const ISSUER = 'https://idp.restore.test';
const log = createLogger({ name: 'test', level: 'silent' });

let server: ThrowawayRedis;
let redis: Redis;
let current: ReturnType<typeof keepDenylistRestored> | undefined;

beforeEach(async () => {
  server = await startThrowawayRedis();
  redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
});

afterEach(async () => {
  current?.stop();
  current = undefined;
  redis.disconnect();
  await server.stop();
});

/** A restorer on the test's Redis whose replay counts its calls (and runs `during`, if given, in each). */
function startRestorer(during?: (n: number) => Promise<void>) {
  const calls = { replays: 0 };
  const restorer = keepDenylistRestored({
    redis,
    issuer: ISSUER,
    replay: async () => {
      calls.replays++;
      await during?.(calls.replays);
      return 0;
    },
    log,
  });
  current = restorer;
  return { restorer, calls };
}

async function until(what: string, ok: () => boolean, ms = 5 * RESTORE_CHECK_MS): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the denylist restorer at a failover', () => {
  it('makes a forced replay that failed (Redis not writable yet) once Redis takes writes, marker or not', async () => {
    await redis.set(revocationsRestoredKey(ISSUER), 'replicated by the old master');
    // A replica of a master that is gone: reads work, writes answer READONLY.
    await redis.call('REPLICAOF', '127.0.0.1', String(await freePort()));
    const { restorer, calls } = startRestorer();
    await restorer.check(true);
    expect(calls.replays).toBe(0);
    expect(await redis.get(revocationsRestoredKey(ISSUER))).toBe('replicated by the old master');

    await redis.call('REPLICAOF', 'NO', 'ONE');
    await until('the owed replay', () => calls.replays > 0);
    expect(calls.replays).toBe(1);
    // Owed once: made, then the marker governs again.
    await new Promise((r) => setTimeout(r, 2.5 * RESTORE_CHECK_MS));
    expect(calls.replays).toBe(1);
  });

  it('makes a replay forced while another check runs, after it', async () => {
    let release: () => void = () => {};
    const { restorer, calls } = startRestorer(async (n) => {
      if (n === 1) await new Promise<void>((r) => (release = r));
    });
    // The marker is missing: the first check replays (and blocks here).
    const first = restorer.check();
    await until('the first replay to start', () => calls.replays === 1);
    // A failover now: what the first replay wrote may be lost with the master it wrote to.
    const forced = restorer.check(true);
    release();
    await Promise.all([first, forced]);
    expect(calls.replays).toBe(2);
  });

  it('replays when the marker is missing and not when it is there', async () => {
    const { restorer, calls } = startRestorer();
    await restorer.check();
    expect(calls.replays).toBe(1);
    await restorer.check();
    expect(calls.replays).toBe(1);
    await redis.flushall();
    await until('the replay after the loss', () => calls.replays === 2);
  });
});
