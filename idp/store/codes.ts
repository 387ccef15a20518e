import { createHash } from 'node:crypto';
import type { Pool } from '../../lib/db.ts';
import { IAT_SQL, isBlockedSql, type Queryable, userLockShared } from './transaction.ts';

/** How a code is kept: its SHA-256 (base64url); the code handed to the client is never stored. */
export function hashCode(code: string): string {
  return createHash('sha256').update(code).digest('base64url');
}

export const CODE_TTL_SECONDS = 60;

export interface CodeRecord {
  clientId: string;
  userId: string;
  subject: string;
  email: string;
  emailVerified: boolean;
  codeChallenge: string;
  redirectUri: string;
  scope: string;
  nonce: string | undefined;
  familyId: string;
  authTime: number;
  /** `dpop_jkt` on authorize (RFC 9449 §10): the exchange needs a proof by this key. */
  dpopJkt?: string;
}

export interface ConsumedCode extends CodeRecord {
  expired: boolean;
  /** True when this call consumed it; false when it had been consumed before (a replay). */
  firstUse: boolean;
  /** Consumed by revoke-user (or block) before it was redeemed. */
  revoked: boolean;
  /** The user is blocked now. */
  blocked: boolean;
  /** The database clock at the start of the exchange's transaction: the access token's `iat`. */
  iat: number;
}

export interface CodeStore {
  /** Under the user's lock; false (nothing stored) when the user is blocked. */
  create(codeHash: string, rec: CodeRecord): Promise<boolean>;
  /**
   * Inside the exchange's transaction, first: takes the code's user lock shared (docs/idp.md § Revocation).
   * False when there is no such code.
   */
  lockUser(tx: Queryable, codeHash: string): Promise<boolean>;
  /** Atomically marks the code consumed; a second call for the same code sees firstUse = false. */
  consume(tx: Queryable, codeHash: string): Promise<ConsumedCode | undefined>;
}

interface Row {
  client_id: string;
  user_id: string;
  subject: string;
  email: string;
  email_verified: boolean;
  code_challenge: string;
  redirect_uri: string;
  scope: string;
  nonce: string | null;
  family_id: string;
  auth_time: string;
  dpop_jkt: string | null;
  expired: boolean;
  first_use: boolean;
  revoked: boolean;
  blocked: boolean;
  iat: string;
}

export function createCodeStore(pool: Pool): CodeStore {
  return {
    async create(codeHash, r) {
      // The user lock orders the code against a revoke-user or block under way: one that started first has
      // committed (and the block is seen here); one that starts later finds this code and consumes it.
      const { rowCount } = await pool.query({
        name: 'code_create',
        text: `INSERT INTO platform.oauth_codes
                 (code, client_id, user_id, subject, email, code_challenge, redirect_uri, scope, nonce, family_id,
                  auth_time, expires_at, email_verified, dpop_jkt)
               SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now() + make_interval(secs => $12), $13, $14
                 FROM (SELECT ${userLockShared('$5::text')}) l
                WHERE NOT ${isBlockedSql('$5::text')}`,
        values: [
          codeHash,
          r.clientId,
          r.userId,
          r.subject,
          r.email,
          r.codeChallenge,
          r.redirectUri,
          r.scope,
          r.nonce ?? null,
          r.familyId,
          r.authTime,
          CODE_TTL_SECONDS,
          r.emailVerified,
          r.dpopJkt ?? null,
        ],
      });
      return rowCount === 1;
    },
    async lockUser(tx, codeHash) {
      const { rowCount } = await tx.query({
        name: 'code_lock_user',
        text: `SELECT ${userLockShared('email')} FROM platform.oauth_codes WHERE code = $1`,
        values: [codeHash],
      });
      return rowCount === 1;
    },
    async consume(tx, codeHash) {
      // The row lock taken by UPDATE makes concurrent exchanges queue; only the first sees consumed_at NULL.
      const { rows } = await tx.query<Row>({
        name: 'code_consume',
        text: `WITH prev AS (SELECT code, consumed_at FROM platform.oauth_codes WHERE code = $1 FOR UPDATE)
               UPDATE platform.oauth_codes c
                  SET consumed_at = COALESCE(c.consumed_at, now())
                 FROM prev
                WHERE c.code = prev.code
            RETURNING c.client_id, c.user_id, c.subject, c.email, c.email_verified, c.code_challenge, c.redirect_uri, c.scope, c.nonce,
                      c.family_id, c.auth_time, c.dpop_jkt, c.expires_at <= now() AS expired, prev.consumed_at IS NULL AS first_use,
                      c.revoked_at IS NOT NULL AS revoked, ${isBlockedSql('c.email')} AS blocked,
                      ${IAT_SQL} AS iat`,
        values: [codeHash],
      });
      const r = rows[0];
      if (!r) return undefined;
      return {
        clientId: r.client_id,
        userId: r.user_id,
        subject: r.subject,
        email: r.email,
        emailVerified: r.email_verified,
        codeChallenge: r.code_challenge,
        redirectUri: r.redirect_uri,
        scope: r.scope,
        nonce: r.nonce ?? undefined,
        familyId: r.family_id,
        authTime: Number(r.auth_time),
        dpopJkt: r.dpop_jkt ?? undefined,
        expired: r.expired,
        firstUse: r.first_use,
        revoked: r.revoked,
        blocked: r.blocked,
        iat: Number(r.iat),
      };
    },
  };
}
