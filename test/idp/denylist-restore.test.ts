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
let restorer: ReturnType<typeof keepDenylistRestored> | undefined;

beforeEach(async () => {
  server = await startThrowawayRedis();
  redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
});

afterEach(async () => {
  restorer?.stop();
  restorer = undefined;
  redis.disconnect();
  await server.stop();
});

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
    let replays = 0;
    restorer = keepDenylistRestored({
      redis,
      issuer: ISSUER,
      replay: async () => {
        replays++;
        return 0;
      },
      log,
    });
    await restorer.check(true);
    expect(replays).toBe(0);
    expect(await redis.get(revocationsRestoredKey(ISSUER))).toBe('replicated by the old master');

    await redis.call('REPLICAOF', 'NO', 'ONE');
    await until('the owed replay', () => replays > 0);
    expect(replays).toBe(1);
    // Owed once: made, then the marker governs again.
    await new Promise((r) => setTimeout(r, 2.5 * RESTORE_CHECK_MS));
    expect(replays).toBe(1);
  });

  it('makes a replay forced while another check runs, after it', async () => {
    let release: () => void = () => {};
    let replays = 0;
    restorer = keepDenylistRestored({
      redis,
      issuer: ISSUER,
      replay: async () => {
        replays++;
        if (replays === 1) await new Promise<void>((r) => (release = r));
        return 0;
      },
      log,
    });
    // The marker is missing: the first check replays (and blocks here).
    const first = restorer.check();
    await until('the first replay to start', () => replays === 1);
    // A failover now: what the first replay wrote may be lost with the master it wrote to.
    const forced = restorer.check(true);
    release();
    await Promise.all([first, forced]);
    expect(replays).toBe(2);
  });

  it('replays when the marker is missing and not when it is there', async () => {
    let replays = 0;
    restorer = keepDenylistRestored({
      redis,
      issuer: ISSUER,
      replay: async () => {
        replays++;
        return 0;
      },
      log,
    });
    await restorer.check();
    expect(replays).toBe(1);
    await restorer.check();
    expect(replays).toBe(1);
    await redis.flushall();
    await until('the replay after the loss', () => replays === 2);
  });
});
