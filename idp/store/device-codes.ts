import type { Pool } from '../../lib/db.ts';
import { IAT_SQL, isBlockedSql, type Queryable, userLockShared } from './transaction.ts';

export const DEVICE_CODE_TTL_SECONDS = 600;
export const DEVICE_POLL_INTERVAL_SECONDS = 5;
/** RFC 8628 §3.5: every slow_down adds 5 s to the interval for this and all later polls. */
export const SLOW_DOWN_STEP_SECONDS = 5;

export interface PendingDevice {
  clientId: string;
  scope: string;
  familyId: string;
}

/** What the verification page shows and decides on (looked up by user code). */
export interface DeviceRequest {
  deviceCodeHash: string;
  clientId: string;
  scope: string;
  status: 'pending' | 'approved' | 'denied';
  expired: boolean;
}

export interface Approval {
  userId: string;
  subject: string;
  email: string;
  grantedScope: string;
  authTime: number;
  emailVerified: boolean;
}

export type PollOutcome =
  | { kind: 'unknown' }
  | { kind: 'wrong_client' }
  | { kind: 'consumed'; familyId: string }
  /** Approved, then consumed by revoke-user or block before the device collected its tokens. */
  | { kind: 'revoked' }
  | { kind: 'blocked' }
  | { kind: 'expired' }
  | { kind: 'slow_down'; interval: number }
  | { kind: 'pending' }
  | { kind: 'denied' }
  | { kind: 'approved'; familyId: string; approval: Approval; iat: number };

export interface DeviceCodeStore {
  /** False when the user code hash is already taken (the caller draws another). */
  create(deviceCodeHash: string, userCodeHash: string, rec: PendingDevice): Promise<boolean>;
  findByUserCode(userCodeHash: string): Promise<DeviceRequest | undefined>;
  /**
   * Approves (under the approving user's lock; not for a blocked user) or denies a pending, unexpired request;
   * false when it was no longer pending, or the user is blocked.
   */
  decide(
    userCodeHash: string,
    decision: { approve: true; approval: Approval } | { approve: false },
  ): Promise<boolean>;
  /**
   * One poll, atomically: records the poll time, applies slow_down (interval grows), and consumes an approved
   * code so a second poll with it finds it used.
   */
  poll(tx: Queryable, deviceCodeHash: string, clientId: string): Promise<PollOutcome>;
  /**
   * Inside the poll's transaction, first: takes the approving user's lock shared (docs/idp.md § Revocation)
   * when the code has been approved; a pending code has no user yet.
   */
  lockUser(tx: Queryable, deviceCodeHash: string): Promise<void>;
}

interface PollRow {
  client_id: string;
  status: 'pending' | 'approved' | 'denied';
  family_id: string;
  expired: boolean;
  too_fast: boolean;
  was_consumed: boolean;
  interval_seconds: number;
  user_id: string | null;
  subject: string | null;
  email: string | null;
  granted_scope: string | null;
  auth_time: string | null;
  email_verified: boolean | null;
  revoked: boolean;
  blocked: boolean;
  iat: string;
}

export function createDeviceCodeStore(pool: Pool): DeviceCodeStore {
  return {
    async create(deviceCodeHash, userCodeHash, r) {
      const { rowCount } = await pool.query({
        name: 'device_create',
        text: `INSERT INTO platform.device_codes
                 (device_code_hash, user_code_hash, client_id, scope, family_id, interval_seconds, expires_at)
               VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))
               ON CONFLICT (user_code_hash) DO NOTHING`,
        values: [
          deviceCodeHash,
          userCodeHash,
          r.clientId,
          r.scope,
          r.familyId,
          DEVICE_POLL_INTERVAL_SECONDS,
          DEVICE_CODE_TTL_SECONDS,
        ],
      });
      return rowCount === 1;
    },
    async findByUserCode(userCodeHash) {
      const { rows } = await pool.query<{
        device_code_hash: string;
        client_id: string;
        scope: string;
        status: DeviceRequest['status'];
        expired: boolean;
      }>({
        name: 'device_find_user_code',
        text: `SELECT device_code_hash, client_id, scope, status, expires_at <= now() AS expired
                 FROM platform.device_codes WHERE user_code_hash = $1`,
        values: [userCodeHash],
      });
      const r = rows[0];
      if (!r) return undefined;
      return {
        deviceCodeHash: r.device_code_hash,
        clientId: r.client_id,
        scope: r.scope,
        status: r.status,
        expired: r.expired,
      };
    },
    async decide(userCodeHash, d) {
      const a = d.approve ? d.approval : undefined;
      // An approval holds the user lock (a denial names no user: $5 is NULL and the lock is skipped).
      const { rowCount } = await pool.query({
        name: 'device_decide',
        text: `UPDATE platform.device_codes
                  SET status = $2, user_id = $3, subject = $4, email = $5, granted_scope = $6, auth_time = $7,
                      email_verified = $8, decided_at = now()
                 FROM (SELECT CASE WHEN $5::text IS NULL THEN NULL ELSE ${userLockShared('$5::text')}::text END) l
                WHERE user_code_hash = $1 AND status = 'pending' AND expires_at > now()
                  AND ($5::text IS NULL OR NOT ${isBlockedSql('$5::text')})`,
        values: [
          userCodeHash,
          d.approve ? 'approved' : 'denied',
          a?.userId ?? null,
          a?.subject ?? null,
          a?.email ?? null,
          a?.grantedScope ?? null,
          a?.authTime ?? null,
          a?.emailVerified ?? null,
        ],
      });
      return rowCount === 1;
    },
    async lockUser(tx, deviceCodeHash) {
      await tx.query({
        name: 'device_lock_user',
        text: `SELECT ${userLockShared('email')} FROM platform.device_codes
                WHERE device_code_hash = $1 AND email IS NOT NULL`,
        values: [deviceCodeHash],
      });
    },
    async poll(tx, deviceCodeHash, clientId) {
      // The row lock makes concurrent polls queue: only one of them can consume an approved code.
      const { rows } = await tx.query<PollRow>({
        name: 'device_poll',
        text: `WITH prev AS (
                 SELECT device_code_hash, client_id, status, consumed_at, expires_at <= now() AS expired,
                        (last_polled_at IS NOT NULL
                          AND last_polled_at > now() - make_interval(secs => interval_seconds)) AS too_fast
                   FROM platform.device_codes WHERE device_code_hash = $1 FOR UPDATE)
               UPDATE platform.device_codes d
                  SET last_polled_at = now(),
                      interval_seconds = d.interval_seconds + CASE
                        WHEN prev.too_fast AND prev.consumed_at IS NULL AND NOT prev.expired
                             AND prev.client_id = $2 THEN $3 ELSE 0 END,
                      consumed_at = CASE
                        WHEN prev.consumed_at IS NULL AND NOT prev.expired AND NOT prev.too_fast
                             AND prev.status = 'approved' AND prev.client_id = $2 THEN now()
                        ELSE d.consumed_at END
                 FROM prev
                WHERE d.device_code_hash = prev.device_code_hash
            RETURNING d.client_id, d.status, d.family_id, prev.expired, prev.too_fast,
                      prev.consumed_at IS NOT NULL AS was_consumed, d.interval_seconds, d.user_id, d.subject,
                      d.email, d.granted_scope, d.auth_time, d.email_verified, d.revoked_at IS NOT NULL AS revoked,
                      (d.email IS NOT NULL AND ${isBlockedSql('d.email')}) AS blocked, ${IAT_SQL} AS iat`,
        values: [deviceCodeHash, clientId, SLOW_DOWN_STEP_SECONDS],
      });
      const r = rows[0];
      if (!r) return { kind: 'unknown' };
      if (r.client_id !== clientId) return { kind: 'wrong_client' };
      if (r.revoked) return { kind: 'revoked' };
      if (r.was_consumed) return { kind: 'consumed', familyId: r.family_id };
      if (r.expired) return { kind: 'expired' };
      if (r.too_fast) return { kind: 'slow_down', interval: r.interval_seconds };
      if (r.status === 'pending') return { kind: 'pending' };
      if (r.status === 'denied') return { kind: 'denied' };
      if (r.blocked) return { kind: 'blocked' };
      return {
        kind: 'approved',
        iat: Number(r.iat),
        familyId: r.family_id,
        approval: {
          userId: r.user_id!,
          subject: r.subject!,
          email: r.email!,
          grantedScope: r.granted_scope!,
          authTime: Number(r.auth_time),
          emailVerified: r.email_verified === true,
        },
      };
    },
  };
}
