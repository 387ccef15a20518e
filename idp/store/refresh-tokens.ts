import type { Pool } from '../../lib/db.ts';

export const REFRESH_TTL_SECONDS = 30 * 24 * 3600;
/** A rotated-out token presented again by the same client within 10 s is a retry, not theft. */
export const RETRY_WINDOW_SECONDS = 10;

export interface Grant {
  familyId: string;
  userId: string;
  subject: string;
  email: string;
  clientId: string;
  scope: string;
  authTime: number;
  /** users."emailVerified" was set when the user signed in (the id_token's email_verified). */
  emailVerified: boolean;
}

/** What is written alongside every issued refresh token: the access token's audit row. */
export interface Issuance {
  jti: string;
  grantType: 'authorization_code' | 'refresh_token' | 'urn:ietf:params:oauth:grant-type:device_code';
  /** Scope of the access token (may be narrower than the grant's on refresh). */
  scope?: string;
  iat: number;
  exp: number;
}

export interface NewToken {
  id: string;
  hash: string;
}

export type RotateOutcome =
  | { kind: 'rotated'; grant: Grant }
  | { kind: 'invalid'; reason: string }
  | { kind: 'scope_exceeded' }
  | { kind: 'reuse'; grant: Grant };

export interface RefreshTokenStore {
  /** Starts a family (code exchange): the refresh token and the audit row, in one statement. */
  issue(grant: Grant, token: NewToken, issuance: Issuance): Promise<void>;
  /**
   * Rotates `hash` into `next` and appends the audit row. One round trip on the common path; the retry window
   * and reuse detection take a transaction on the rare one.
   */
  rotate(hash: string, clientId: string, next: NewToken, issuance: Issuance): Promise<RotateOutcome>;
  /**
   * Revokes the token's whole family; returns its client, undefined when unknown, or 'other-client' (and
   * revokes nothing) when `clientId` is given and the token was issued to another client.
   */
  revoke(hash: string, clientId?: string): Promise<{ clientId: string } | 'other-client' | undefined>;
  revokeFamily(familyId: string, reason: string): Promise<number>;
  /** Revokes every active token of a user, by user id or subject. */
  revokeSubject(subject: string, reason: string): Promise<number>;
}

interface GrantRow {
  family_id: string;
  user_id: string;
  subject: string;
  email: string;
  client_id: string;
  scope: string;
  auth_time: string;
  email_verified: boolean;
}

const toGrant = (r: GrantRow): Grant => ({
  familyId: r.family_id,
  userId: r.user_id,
  subject: r.subject,
  email: r.email,
  clientId: r.client_id,
  scope: r.scope,
  authTime: Number(r.auth_time),
  emailVerified: r.email_verified,
});

export interface RefreshStoreOptions {
  /** Schema-qualified web-application users table and the SQL type of its id, to refuse deleted users. */
  usersTable?: { name: string; idType: string };
}

export function createRefreshTokenStore(pool: Pool, opts: RefreshStoreOptions = {}): RefreshTokenStore {
  // A refresh re-reads the user (alias r is the refresh token row): a deleted user, or one left without an
  // email, gets invalid_grant; a changed email is carried by the new tokens and the new refresh token.
  const userRow = opts.usersTable
    ? `FROM ${opts.usersTable.name} u WHERE u.id = r.user_id::${opts.usersTable.idType}`
    : undefined;
  const userExists = userRow
    ? `AND EXISTS (SELECT 1 ${userRow} AND u.email IS NOT NULL AND trim(u.email) <> '')`
    : '';
  const currentEmail = userRow ? `COALESCE((SELECT lower(trim(u.email)) ${userRow}), r.email)` : 'r.email';

  const auditInsert = (from: string) => `
    INSERT INTO platform.issuance_audit (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at)
    SELECT to_timestamp($5), $4, $7, user_id, subject, email, client_id, COALESCE($8, scope), to_timestamp($6) FROM ${from}`;

  // $1 hash · $2 new id · $3 new hash · $4 jti · $5 iat · $6 exp · $7 grant type · $8 narrowed scope · $9 client
  const fastRotate = `
    WITH old AS (
      UPDATE platform.refresh_tokens r
         SET rotated_to = $2, rotated_at = now()
       WHERE r.token_hash = $1 AND r.client_id = $9 AND r.rotated_to IS NULL AND r.revoked_at IS NULL
         AND r.expires_at > now() ${userExists}
         AND ($8::text IS NULL OR string_to_array($8::text, ' ') <@ string_to_array(r.scope, ' '))
   RETURNING r.family_id, r.user_id, r.subject, ${currentEmail} AS email, r.client_id, r.scope, r.auth_time,
             r.email_verified
    ), ins AS (
      INSERT INTO platform.refresh_tokens
             (id, token_hash, family_id, user_id, subject, email, client_id, scope, auth_time, email_verified, expires_at)
      SELECT $2, $3, family_id, user_id, subject, email, client_id, scope, auth_time, email_verified,
             now() + interval '${REFRESH_TTL_SECONDS} seconds' FROM old
    ), audit AS (${auditInsert('old')})
    SELECT family_id, user_id, subject, email, client_id, scope, auth_time, email_verified FROM old`;

  return {
    async issue(g, t, i) {
      await pool.query({
        name: 'refresh_issue',
        text: `WITH ins AS (
                 INSERT INTO platform.refresh_tokens
                        (id, token_hash, family_id, user_id, subject, email, client_id, scope, auth_time, email_verified,
                         expires_at)
                 VALUES ($1, $2, $3, $9, $10, $11, $12, $13, $14, $15,
                         now() + interval '${REFRESH_TTL_SECONDS} seconds')
                 RETURNING user_id, subject, email, client_id, scope
               )
               INSERT INTO platform.issuance_audit
                      (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at)
               SELECT to_timestamp($5), $4, $7, user_id, subject, email, client_id, COALESCE($8, scope), to_timestamp($6)
                 FROM ins`,
        values: [
          t.id,
          t.hash,
          g.familyId,
          i.jti,
          i.iat,
          i.exp,
          i.grantType,
          i.scope ?? null,
          g.userId,
          g.subject,
          g.email,
          g.clientId,
          g.scope,
          g.authTime,
          g.emailVerified,
        ],
      });
    },

    async rotate(hash, clientId, next, i) {
      const values = [hash, next.id, next.hash, i.jti, i.iat, i.exp, i.grantType, i.scope ?? null, clientId];
      const fast = await pool.query<GrantRow>({ name: 'refresh_rotate', text: fastRotate, values });
      if (fast.rows[0]) return { kind: 'rotated', grant: toGrant(fast.rows[0]) };
      return rotateSlow(values, hash, clientId, next);
    },

    async revoke(hash, clientId) {
      // The client check is in the statement: another client's token is reported, never revoked.
      const { rows } = await pool.query<{ client_id: string }>(
        `WITH t AS (SELECT family_id, client_id FROM platform.refresh_tokens WHERE token_hash = $1),
              upd AS (UPDATE platform.refresh_tokens SET revoked_at = now(), revoked_reason = 'revoked'
                       WHERE family_id = (SELECT family_id FROM t WHERE $2::text IS NULL OR client_id = $2)
                         AND revoked_at IS NULL)
         SELECT client_id FROM t`,
        [hash, clientId ?? null],
      );
      const r = rows[0];
      if (!r) return undefined;
      if (clientId !== undefined && r.client_id !== clientId) return 'other-client';
      return { clientId: r.client_id };
    },

    async revokeFamily(familyId, reason) {
      const r = await pool.query(
        'UPDATE platform.refresh_tokens SET revoked_at = now(), revoked_reason = $2 WHERE family_id = $1 AND revoked_at IS NULL',
        [familyId, reason],
      );
      return r.rowCount ?? 0;
    },

    async revokeSubject(subject, reason) {
      const r = await pool.query(
        `UPDATE platform.refresh_tokens SET revoked_at = now(), revoked_reason = $2
          WHERE (subject = $1 OR user_id = $1) AND revoked_at IS NULL`,
        [subject, reason],
      );
      return r.rowCount ?? 0;
    },
  };

  async function rotateSlow(
    values: unknown[],
    hash: string,
    clientId: string,
    next: NewToken,
  ): Promise<RotateOutcome> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<
        GrantRow & {
          id: string;
          revoked: boolean;
          expired: boolean;
          rotated_to: string | null;
          in_window: boolean;
          user_exists: boolean;
          scope_ok: boolean;
        }
      >(
        `SELECT r.id, r.family_id, r.user_id, r.subject, ${currentEmail} AS email, r.client_id, r.scope, r.auth_time,
                r.email_verified, r.rotated_to,
                r.revoked_at IS NOT NULL AS revoked, r.expires_at <= now() AS expired,
                r.rotated_at > now() - interval '${RETRY_WINDOW_SECONDS} seconds' AS in_window,
                true ${userExists} AS user_exists,
                ($2::text IS NULL OR string_to_array($2::text, ' ') <@ string_to_array(r.scope, ' ')) AS scope_ok
           FROM platform.refresh_tokens r WHERE r.token_hash = $1 FOR UPDATE`,
        [hash, values[7]],
      );
      const r = rows[0];
      let outcome: RotateOutcome;
      if (!r) outcome = { kind: 'invalid', reason: 'refresh token is unknown' };
      else if (r.client_id !== clientId)
        outcome = { kind: 'invalid', reason: 'refresh token was issued to another client' };
      else if (r.revoked) outcome = { kind: 'invalid', reason: 'refresh token is revoked' };
      else if (r.expired) outcome = { kind: 'invalid', reason: 'refresh token is expired' };
      else if (!r.user_exists) outcome = { kind: 'invalid', reason: 'user no longer exists' };
      else if (!r.scope_ok) outcome = { kind: 'scope_exceeded' };
      else if (r.rotated_to === null) {
        // Valid, yet the fast path missed it: a concurrent rotation committed in between. Rotate here.
        outcome = await rotateLocked(client, r, values);
      } else {
        // Rotated out before. A retry only while inside the window and while the successor is unused.
        const retired = r.in_window
          ? await client.query(
              `UPDATE platform.refresh_tokens SET revoked_at = now(), revoked_reason = 'superseded by retry'
                WHERE id = $1 AND rotated_to IS NULL AND revoked_at IS NULL`,
              [r.rotated_to],
            )
          : undefined;
        if (retired?.rowCount === 1) {
          outcome = await rotateLocked(client, r, values);
        } else {
          await client.query(
            `UPDATE platform.refresh_tokens SET revoked_at = now(), revoked_reason = 'reuse detected'
              WHERE family_id = $1 AND revoked_at IS NULL`,
            [r.family_id],
          );
          outcome = { kind: 'reuse', grant: toGrant(r) };
        }
      }
      await client.query('COMMIT');
      return outcome;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }

    async function rotateLocked(
      c: typeof client,
      r: GrantRow & { id: string },
      v: unknown[],
    ): Promise<RotateOutcome> {
      await c.query(
        'UPDATE platform.refresh_tokens SET rotated_to = $2, rotated_at = COALESCE(rotated_at, now()) WHERE id = $1',
        [r.id, next.id],
      );
      // $1 is the old token's id; $2..$8 as in the fast path.
      await c.query(
        `WITH old AS (SELECT r.family_id, r.user_id, r.subject, ${currentEmail} AS email, r.client_id, r.scope,
                             r.auth_time, r.email_verified FROM platform.refresh_tokens r WHERE r.id = $1),
              ins AS (INSERT INTO platform.refresh_tokens
                             (id, token_hash, family_id, user_id, subject, email, client_id, scope, auth_time,
                              email_verified, expires_at)
                      SELECT $2, $3, family_id, user_id, subject, email, client_id, scope, auth_time, email_verified,
                             now() + interval '${REFRESH_TTL_SECONDS} seconds' FROM old)
         ${auditInsert('old')}`,
        [r.id, ...v.slice(1, 8)],
      );
      return { kind: 'rotated', grant: toGrant(r) };
    }
  }
}
