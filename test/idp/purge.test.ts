// Expired authorization and device codes are deleted a day after they expire, not before (a replay within the
// day is still recognised), and the IdP's schedule does it without being asked.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purgeExpiredCodes, schedulePurge } from '../../idp/store/purge.ts';
import { createLogger } from '../../lib/logger.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

/** One authorization code and one device code, each expiring at `expires` (an SQL expression). */
async function seed(tag: string, expires: string): Promise<void> {
  await db.pool.query(
    `INSERT INTO platform.oauth_codes (code, client_id, user_id, subject, email, code_challenge, redirect_uri,
       scope, family_id, auth_time, expires_at)
     VALUES ($1, 'platform-cli', '1', 's', 'a@example.com', 'c', 'http://127.0.0.1/cb', 'openid', $2, 0, ${expires})`,
    [`code-${tag}`, randomUUID()],
  );
  await db.pool.query(
    `INSERT INTO platform.device_codes (device_code_hash, user_code_hash, client_id, scope, family_id,
       interval_seconds, expires_at)
     VALUES ($1, $2, 'platform-cli', 'openid', $3, 5, ${expires})`,
    [`device-${tag}`, `user-${tag}`, randomUUID()],
  );
}

async function left(): Promise<string[]> {
  const { rows } = await db.pool.query<{ k: string }>(
    `SELECT code AS k FROM platform.oauth_codes UNION ALL SELECT device_code_hash FROM platform.device_codes
     ORDER BY 1`,
  );
  return rows.map((r) => r.k);
}

describe('purge of expired codes', () => {
  it('deletes codes expired more than a day ago and keeps live and recently expired ones', async () => {
    await seed('old', "now() - interval '25 hours'");
    await seed('recent', "now() - interval '23 hours'");
    await seed('live', "now() + interval '1 minute'");
    expect(await purgeExpiredCodes(db.pool)).toEqual({ codes: 1, deviceCodes: 1, sessionLogins: 0 });
    expect(await left()).toEqual(['code-live', 'code-recent', 'device-live', 'device-recent']);
    expect(await purgeExpiredCodes(db.pool)).toEqual({ codes: 0, deviceCodes: 0, sessionLogins: 0 });
  });

  it('runs on its schedule and logs what it deleted', async () => {
    await seed('stale', "now() - interval '2 days'");
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({
      name: 'purge-test',
      destination: { write: (line: string) => void lines.push(JSON.parse(line)) },
    });
    const stop = schedulePurge({ pool: db.pool, log, intervalMs: 60 });
    try {
      await expect
        .poll(() => lines.find((l) => l.msg === 'expired codes purged'))
        .toMatchObject({
          codes: 1,
          deviceCodes: 1,
        });
    } finally {
      stop();
    }
    expect(await left()).not.toContain('code-stale');
  });
});
