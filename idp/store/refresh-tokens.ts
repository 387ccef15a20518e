import pg from 'pg';
import { coalesce } from '../../lib/coalesce.ts';
import type { Pool, PoolClient } from '../../lib/db.ts';
import type { EntityPermission } from '../entity-grants/permission.ts';
import { REFRESH_TTL_SECONDS, rotationStatements, type UsersTable } from './rotation-sql.ts';
import { IAT_SQL, inTransaction, type Queryable } from './transaction.ts';

export { ACCESS_TTL_SECONDS, REFRESH_TTL_SECONDS } from './rotation-sql.ts';
/**
 * How many successors one refresh token may be rotated into: the first rotation and, inside the retry window,
 * siblings for other processes of the client. One more presentation is treated as reuse.
 */
export const MAX_ROTATIONS_PER_TOKEN = 8;

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
  /** DPoP (RFC 9449): the key the family is bound to (set at issuance, never later); absent: unbound. */
  dpopJkt?: string;
}

/** What is written alongside every issued refresh token: the access token's audit row. */
export interface Issuance {
  jti: string;
  grantType: 'authorization_code' | 'refresh_token' | 'urn:ietf:params:oauth:grant-type:device_code';
  /** Scope of the access token (may be narrower than the grant's on refresh). */
  scope?: string;
  /**
   * rotate(): the key of the request's DPoP proof. A bound family rotates only with its own key; otherwise
   * `invalid`, checked before the retry window (nothing revoked, no sibling).
   */
  dpopJkt?: string;
}

export interface NewToken {
  id: string;
  hash: string;
}

/** `iat` is the database clock at the start of the rotating transaction (docs/idp.md § Revocation). */
export type RotateOutcome =
  | {
      kind: 'rotated';
      grant: Grant;
      iat: number;
      /**
       * The user's entity-grant rows (by the grant's email, read FOR SHARE in the rotating statement), when the
       * store reads them there (RefreshStoreOptions.entityGrantsByEmail, no transaction of the caller's, the
       * fast path, an email that lowercases to itself); undefined: the caller reads them.
       */
      entRows?: ReadonlyArray<{ entity: string; permission: EntityPermission }>;
    }
  | { kind: 'invalid'; reason: string }
  /** The asked scope holds one the grant lacks; nothing rotated. `grantScope`: the grant's, to narrow to. */
  | { kind: 'scope_exceeded'; grantScope: string }
  | { kind: 'reuse'; grant: Grant };

/** Which families a revocation takes: by id, or every family of a user. */
export type FamilyFilter =
  | { familyIds: readonly string[] }
  | { email: string; userIds: readonly string[]; subjects: readonly string[] };

export interface RevokedFamilies {
  familyIds: string[];
  subjects: string[];
  /** Refresh tokens of those families that were still unrevoked. */
  tokens: number;
}

export interface RefreshTokenStore {
  /**
   * Starts a family (code exchange, inside its transaction): the family row, the refresh token and the audit
   * row, in one statement. `iat` comes from the exchange's first statement.
   */
  issue(tx: Queryable, grant: Grant, token: NewToken, issuance: Issuance & { iat: number }): Promise<void>;
  /**
   * Rotates `hash` into `next` and appends the audit row. One round trip on the common path; the retry window
   * and reuse detection take a transaction on the rare one. With `tx` (a transaction the caller holds, e.g.
   * with the entitlements it read locked) every statement runs inside it.
   */
  rotate(
    hash: string,
    clientId: string,
    next: NewToken,
    issuance: Issuance,
    tx?: PoolClient,
  ): Promise<RotateOutcome>;
  /** The family and client of a refresh token, undefined when unknown. */
  familyOf(hash: string): Promise<{ familyId: string; clientId: string } | undefined>;
  /**
   * Revokes families (inside the caller's transaction): the family rows first (which waits for rotations in
   * flight, and makes every later rotation fail), then their tokens.
   */
  revokeFamilies(tx: Queryable, filter: FamilyFilter, reason: string): Promise<RevokedFamilies>;
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
  dpop_jkt: string | null;
}

/** A fast rotation's row: the grant, the statement's iat and (with the entity grants) the user's grant rows. */
type FastRow = GrantRow & { iat: string; ent_rows?: Array<[string, EntityPermission]> | null };

const toGrant = (r: GrantRow): Grant => ({
  familyId: r.family_id,
  userId: r.user_id,
  subject: r.subject,
  email: r.email,
  clientId: r.client_id,
  scope: r.scope,
  authTime: Number(r.auth_time),
  emailVerified: r.email_verified,
  ...(r.dpop_jkt ? { dpopJkt: r.dpop_jkt } : {}),
});

export interface RefreshStoreOptions {
  /** Schema-qualified web-application users table and the SQL type of its id, to refuse deleted users. */
  usersTable?: UsersTable;
  /** PLATFORM_REFRESH_RETRY_SECONDS: a whole number of seconds (validated by idp/config.ts). */
  retrySeconds: number;
  /**
   * The entity grants are matched by email only (no PLATFORM_ROLES_SQL): a rotation outside a transaction also
   * reads the user's grant rows (FOR SHARE) in its one statement, saving the token endpoint a round trip.
   */
  entityGrantsByEmail?: boolean;
}

export function createRefreshTokenStore(pool: Pool, opts: RefreshStoreOptions): RefreshTokenStore {
  const retrySeconds = opts.retrySeconds;
  if (!Number.isInteger(retrySeconds) || retrySeconds < 0)
    throw new Error('retrySeconds must be a whole number');
  const { userExists, currentEmail, auditInsert, successorInsert, familyLocked, ...sql } = rotationStatements(
    opts.usersTable,
  );
  const { fastRotate, fastRotateWithEnt, batchRotate, batchRotateWithEnt } = sql;
  const entityGrantsByEmail = opts.entityGrantsByEmail === true;

  // The fast rotation outside a caller's transaction: the calls of one event-loop turn share one statement
  // (lib/coalesce.ts), one statement out at a time: the rotations asked for while one is out leave together when
  // it is back (group commit: under load the batches grow with the load); one alone runs the single statement. A
  // batch the server refused was rolled back whole (autocommit), so each of its tokens is then tried alone and
  // gets what it would have got alone; a batch lost with its connection may have committed, and fails every
  // member as one statement would.
  const rotateOne = async (values: unknown[]) =>
    (
      await pool.query<FastRow>(
        entityGrantsByEmail
          ? { name: 'refresh_rotate_ent', text: fastRotateWithEnt, values }
          : { name: 'refresh_rotate', text: fastRotate, values },
      )
    ).rows[0];
  const rotateCoalesced = coalesce<unknown[], FastRow | undefined>(
    (batch) => {
      if (batch.length === 1) return [rotateOne(batch[0]!)];
      const columns = batch[0]!.map((_, k) => batch.map((v) => v[k]));
      const all = pool
        .query<FastRow & { n: string }>(
          entityGrantsByEmail
            ? { name: 'refresh_rotate_batch_ent', text: batchRotateWithEnt, values: columns }
            : { name: 'refresh_rotate_batch', text: batchRotate, values: columns },
        )
        .then(({ rows }) => {
          const byN = new Map(rows.map((r) => [Number(r.n), r]));
          return batch.map((_, j) => byN.get(j + 1));
        });
      return batch.map((values, j) =>
        all.then(
          (rows) => rows[j],
          (err: unknown) => {
            if (!(err instanceof pg.DatabaseError)) throw err;
            return rotateOne(values);
          },
        ),
      );
    },
    { maxInFlight: 1 },
  );

  return {
    async issue(tx, g, t, i) {
      await tx.query({
        name: 'refresh_issue',
        text: `WITH fam AS (
                 INSERT INTO platform.refresh_families (id, user_id, subject, email, client_id, dpop_jkt)
                 VALUES ($3, $8, $9, $10, $11, $15)
               ), ins AS (
                 INSERT INTO platform.refresh_tokens
                        (id, token_hash, family_id, user_id, subject, email, client_id, scope, auth_time, email_verified,
                         expires_at)
                 VALUES ($1, $2, $3, $8, $9, $10, $11, $12, $13, $14, now() + interval '${REFRESH_TTL_SECONDS} seconds')
                 RETURNING family_id, user_id, subject, email, client_id, scope
               )
               ${auditInsert('ins', { jti: '$4', iat: '$5::bigint', grantType: '$6', scope: '$7' })}`,
        values: [
          t.id,
          t.hash,
          g.familyId,
          i.jti,
          i.iat,
          i.grantType,
          i.scope ?? null,
          g.userId,
          g.subject,
          g.email,
          g.clientId,
          g.scope,
          g.authTime,
          g.emailVerified,
          g.dpopJkt ?? null,
        ],
      });
    },

    async rotate(hash, clientId, next, i, tx) {
      const values = [
        hash,
        next.id,
        next.hash,
        i.jti,
        i.grantType,
        i.scope ?? null,
        clientId,
        i.dpopJkt ?? null,
      ];
      const withEnt = entityGrantsByEmail && tx === undefined;
      const row = tx
        ? (await tx.query<FastRow>({ name: 'refresh_rotate', text: fastRotate, values })).rows[0]
        : await rotateCoalesced(values);
      if (row) {
        const grant = toGrant(row);
        const out: RotateOutcome = { kind: 'rotated', grant, iat: Number(row.iat) };
        // The separate read matches \`email = lower(email)\` computed in JavaScript; the statement matched the
        // email as it is, the same rows only when lowercasing leaves it unchanged (else the caller reads them).
        if (withEnt && grant.email === grant.email.toLowerCase()) {
          out.entRows = (row.ent_rows ?? []).map(([entity, permission]) => ({ entity, permission }));
        }
        return out;
      }
      return tx
        ? rotateSlow(tx, values, clientId)
        : inTransaction(pool, (c) => rotateSlow(c, values, clientId));
    },

    async familyOf(hash) {
      const { rows } = await pool.query<{ family_id: string; client_id: string }>(
        'SELECT family_id, client_id FROM platform.refresh_tokens WHERE token_hash = $1',
        [hash],
      );
      const r = rows[0];
      return r && { familyId: r.family_id, clientId: r.client_id };
    },

    async revokeFamilies(tx, filter, reason) {
      // In id order, so two revocations taking overlapping sets of families cannot deadlock.
      const byId = 'familyIds' in filter;
      const { rows } = await tx.query<{ id: string; subject: string }>(
        `WITH target AS (
           SELECT id FROM platform.refresh_families
            WHERE revoked_at IS NULL
              AND ${byId ? 'id = ANY($1::uuid[])' : '(email = $1 OR user_id = ANY($2::text[]) OR subject = ANY($3::text[]))'}
            ORDER BY id FOR NO KEY UPDATE)
         UPDATE platform.refresh_families f SET revoked_at = now(), revoked_reason = $${byId ? 2 : 4}
           FROM target WHERE f.id = target.id AND f.revoked_at IS NULL
         RETURNING f.id::text AS id, f.subject`,
        byId ? [filter.familyIds, reason] : [filter.email, filter.userIds, filter.subjects, reason],
      );
      // A later statement: it sees every successor a rotation committed while the families were being locked.
      const ids = byId ? [...filter.familyIds] : rows.map((r) => r.id);
      const tokens = await tx.query(
        `UPDATE platform.refresh_tokens SET revoked_at = now(), revoked_reason = $2
          WHERE family_id = ANY($1::uuid[]) AND revoked_at IS NULL`,
        [ids, reason],
      );
      return {
        familyIds: rows.map((r) => r.id),
        subjects: [...new Set(rows.map((r) => r.subject))].sort(),
        tokens: tokens.rowCount ?? 0,
      };
    },
  };

  async function rotateSlow(client: PoolClient, values: unknown[], clientId: string): Promise<RotateOutcome> {
    // The family first (the order every revocation and the fast path take locks in): exclusive among slow
    // rotations of the family, so two of them cannot both decide; then the token.
    const { rows: fam } = await client.query<{
      id: string;
      family_revoked: boolean;
      blocked: boolean;
      dpop_jkt: string | null;
    }>(familyLocked('NO KEY UPDATE'), [values[0]]);
    const { rows } = await client.query<
      GrantRow & {
        id: string;
        revoked: boolean;
        expired: boolean;
        rotated_to: string | null;
        rotations: number;
        in_window: boolean;
        user_exists: boolean;
        scope_ok: boolean;
        iat: string;
      }
    >(
      `SELECT r.id, r.family_id, r.user_id, r.subject, ${currentEmail} AS email, r.client_id, r.scope, r.auth_time,
              r.email_verified, r.rotated_to, r.rotations, NULL::text AS dpop_jkt,
              r.revoked_at IS NOT NULL AS revoked, r.expires_at <= now() AS expired,
              r.rotated_at > now() - interval '${retrySeconds} seconds' AS in_window,
              true ${userExists} AS user_exists,
              ($2::text IS NULL OR string_to_array($2::text, ' ') <@ string_to_array(r.scope, ' ')) AS scope_ok,
              ${IAT_SQL} AS iat
         FROM platform.refresh_tokens r WHERE r.token_hash = $1 FOR UPDATE`,
      [values[0], values[5]],
    );
    const r = rows[0];
    const f = fam[0];
    if (!r || !f) return { kind: 'invalid', reason: 'refresh token is unknown' };
    if (r.client_id !== clientId)
      return { kind: 'invalid', reason: 'refresh token was issued to another client' };
    // Before the retry window and reuse detection: without the key, a bound token (rotated out or not) gets
    // nothing and changes nothing.
    if (f.dpop_jkt !== null && f.dpop_jkt !== values[7])
      return { kind: 'invalid', reason: 'refresh token is DPoP-bound: a proof by its key is required' };
    r.dpop_jkt = f.dpop_jkt;
    if (r.revoked || f.family_revoked) return { kind: 'invalid', reason: 'refresh token is revoked' };
    if (f.blocked) return { kind: 'invalid', reason: 'the user is blocked' };
    if (r.expired) return { kind: 'invalid', reason: 'refresh token is expired' };
    if (!r.user_exists) return { kind: 'invalid', reason: 'user no longer exists' };
    if (!r.scope_ok) return { kind: 'scope_exceeded', grantScope: r.scope };
    // Valid, yet the fast path missed it: a concurrent rotation committed in between. Rotate here.
    if (r.rotated_to === null) return rotateLocked(client, r, values);
    // Rotated out before. Inside the window (from its first rotation) another process of the client: a sibling
    // successor, its own chain, every earlier successor left alive; at most MAX_ROTATIONS_PER_TOKEN in all.
    if (r.in_window && r.rotations < MAX_ROTATIONS_PER_TOKEN) return rotateLocked(client, r, values);
    await revokeForReuse(client, r.family_id);
    return { kind: 'reuse', grant: toGrant(r) };
  }

  async function revokeForReuse(client: PoolClient, familyId: string): Promise<void> {
    await client.query(
      `UPDATE platform.refresh_families SET revoked_at = now(), revoked_reason = 'reuse detected'
        WHERE id = $1 AND revoked_at IS NULL`,
      [familyId],
    );
    await client.query(
      `UPDATE platform.refresh_tokens SET revoked_at = now(), revoked_reason = 'reuse detected'
        WHERE family_id = $1 AND revoked_at IS NULL`,
      [familyId],
    );
  }

  async function rotateLocked(
    c: PoolClient,
    r: GrantRow & { id: string; iat: string },
    v: unknown[],
  ): Promise<RotateOutcome> {
    // rotated_to names the latest successor; the window stays anchored at the first rotation.
    await c.query(
      `UPDATE platform.refresh_tokens SET rotated_to = $2, rotated_at = COALESCE(rotated_at, now()),
              rotations = rotations + 1 WHERE id = $1`,
      [r.id, v[1]],
    );
    // $1 is the old token's id; $2..$4 as in the fast path; the transaction's iat.
    const iat = Number(r.iat);
    await c.query(
      `WITH old AS (SELECT r.family_id, r.user_id, r.subject, ${currentEmail} AS email, r.client_id, r.scope,
                           r.auth_time, r.email_verified FROM platform.refresh_tokens r WHERE r.id = $1),
            ins AS (${successorInsert({ id: '$2', hash: '$3', rotatedFrom: '$1' })})
       ${auditInsert('old', { jti: '$4', iat: '$5::bigint', grantType: '$6', scope: '$7' })}`,
      [r.id, v[1], v[2], v[3], iat, v[4], v[5]],
    );
    return { kind: 'rotated', grant: toGrant(r), iat };
  }
}
