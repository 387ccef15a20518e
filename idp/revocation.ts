import type { Pool } from '../lib/db.ts';
import type { Logger } from '../lib/logger.ts';
import type { RedisClient } from '../lib/redis/client.ts';
import {
  type RevocationPublisher,
  revocationsRestoredKey,
  SUB_CUTOFF_TTL_SECONDS,
} from '../lib/revocation.ts';
import { TemporarilyUnavailableError } from './errors.ts';
import type { RefreshTokenStore } from './store/refresh-tokens.ts';
import { inTransaction, type Queryable, userLockExclusive } from './store/transaction.ts';

/** The longest an access token of any issuer we front lives, plus leeway: how long an unknown jti is denied. */
export const UNKNOWN_JTI_DENY_SECONDS = 24 * 3600;
/** How far back the issuance audit is searched for a user's subjects (the access-token lifetime + leeway). */
const RECENT_ISSUANCE_SECONDS = 3600 + 120;

export interface RevokeTokenResult {
  /** Lowercased. */
  jti: string;
  /** Whether this provider issued a token with that jti. */
  known: boolean;
  /** Until when it is denied: the token's exp, or now + 24 h for an id issued elsewhere. */
  expiresAt: Date;
  /** False while Redis is unreachable: recorded in Postgres (enforced by the IdP), published when Redis returns. */
  published: boolean;
}

export interface RevokeUserResult {
  email: string;
  cutoff: number;
  subjects: string[];
  refreshFamilies: number;
  /** Authorization codes and approved device codes consumed before they were redeemed. */
  codes: number;
  /** False while Redis is unreachable: recorded in Postgres (enforced by the IdP), published when Redis returns. */
  published: boolean;
}

export interface BlockResult extends RevokeUserResult {
  /** False when the user was blocked already (the revocation is made again all the same). */
  created: boolean;
}

export interface TokenClaimsForCheck {
  jti: string;
  sub: string;
  email?: string;
  iat: number;
}

/**
 * The one revocation service: `/oauth/revoke`, the admin API and the console all revoke through it. Every
 * revocation is recorded in Postgres first (the record), then written to the denylist (Redis, or the dev
 * stack's in-process store) and published. `replay()` writes the live records to the denylist again.
 */
export interface RevocationService {
  revokeToken(o: { jti: string; by: string; exp?: number }): Promise<RevokeTokenResult>;
  revokeUser(o: { email: string; by: string }): Promise<RevokeUserResult>;
  /** revoke-user and the block record, in one transaction (docs/idp.md § Blocking). */
  block(o: { email: string; by: string }): Promise<BlockResult>;
  /** Removes the block; tokens revoked by it stay revoked. False when the user was not blocked. */
  unblock(o: { email: string }): Promise<boolean>;
  /**
   * Cut-offs only (an ungrant): the subjects' and the email's live access tokens are refused; refresh tokens
   * stay valid, so the clients refresh and get what the user is entitled to now.
   */
  cutOff(o: { email: string; subjects: readonly string[]; by: string }): Promise<{ cutoff: number }>;
  /**
   * One sign-in (refresh-token family): its refresh tokens and its live access tokens (denied by jti). Returns
   * the refresh tokens revoked. `quiet`: a revocation the provider makes on its own (a replayed code, refresh
   * token reuse): a failure to publish is logged, not thrown (the next replay publishes it).
   */
  revokeFamily(o: { familyId: string; by: string; reason?: string; quiet?: boolean }): Promise<number>;
  /**
   * Ends a machine client (idp/machine-clients): marked revoked (waiting for an issuance under way, which locks
   * the row), then its subject (the client id) cut off. False when no machine client has that id.
   */
  revokeClient(o: { clientId: string; by: string }): Promise<{ cutoff: number } | undefined>;
  /** Whether a token this provider issued is revoked (jti, subject or email cut-off, or a blocked user). */
  isRevoked(claims: TokenClaimsForCheck): Promise<boolean>;
  /** Writes every live revocation to the denylist again; returns how many entries were written. */
  replay(): Promise<number>;
}

export interface RevocationServiceOptions {
  pool: Pool;
  publisher: RevocationPublisher;
  log: Logger;
  /** The web application's users table (quoted), when present: finds a user's id by email. */
  usersTable?: string;
  refreshTokens: Pick<RefreshTokenStore, 'revokeFamilies'>;
}

/** The 503 of a revocation recorded but not published (Redis unreachable), where the answer cannot say so. */
export const NOT_PUBLISHED =
  'the revocation is recorded but Redis is unreachable, so the gateways do not have it yet; it is published when Redis is back, retry to confirm';

const nowSeconds = () => Math.floor(Date.now() / 1000);

/**
 * Records an email cut-off and one per subject, all at the database clock read by this statement: after every
 * lock the revocation took (docs/idp.md § Revocation), so every token issued before has `iat` <= it.
 */
async function recordCutoffs(db: Queryable, email: string, subjects: readonly string[], by: string) {
  const { rows } = await db.query<{ cutoff: string }>(
    `WITH c AS (SELECT floor(extract(epoch FROM clock_timestamp()))::bigint AS cutoff)
     INSERT INTO platform.revocations (kind, value, cutoff, expires_at, revoked_by)
     SELECT k, v, c.cutoff, to_timestamp(c.cutoff + $3), $4 FROM unnest($1::text[], $2::text[]) AS t(k, v), c
     RETURNING cutoff`,
    [['email', ...subjects.map(() => 'sub')], [email, ...subjects], SUB_CUTOFF_TTL_SECONDS, by],
  );
  return Number(rows[0]!.cutoff);
}

/** Records a jti denial for every live access token issued from the families (not denied already). */
async function denyFamilyAccessTokens(db: Queryable, familyIds: readonly string[], by: string) {
  const { rows } = await db.query<{ jti: string; exp: string }>(
    `INSERT INTO platform.revocations (kind, value, known, expires_at, revoked_by)
     SELECT 'jti', a.jti::text, true, a.expires_at, $2 FROM platform.issuance_audit a
      WHERE a.family_id = ANY($1::uuid[]) AND a.expires_at > now()
        AND NOT EXISTS (SELECT 1 FROM platform.revocations v WHERE v.kind = 'jti' AND v.value = a.jti::text)
     RETURNING value AS jti, extract(epoch FROM expires_at)::bigint AS exp`,
    [familyIds, by],
  );
  return rows.map((r) => ({ jti: r.jti, exp: Number(r.exp) }));
}

/** Where a revocation's cascade starts: the tokens revoked, a sign-in's tokens, or a machine client's exchanges. */
interface ExchangedFrom {
  jtis?: readonly string[];
  familyIds?: readonly string[];
  /** The tokens this machine client got by exchanging a user's token (its own tokens are cut by its subject). */
  clientId?: string;
}

/** How deep the cascade follows exchanges of exchanged tokens (idp/token-exchange refuses deeper chains). */
const MAX_EXCHANGE_DEPTH = 8;

/**
 * Records a jti denial for every live platform token exchanged (RFC 8693 delegation, idp/token-exchange) from the
 * given tokens, and from those, down the chain. Run after the revocation it follows has committed: an exchange
 * under way checks the revocations again after its own commit, so one of the two always sees the other.
 */
async function denyExchanged(db: Queryable, from: ExchangedFrom, by: string) {
  const jtis = (from.jtis ?? []).filter((j) => UUID.test(j));
  if (jtis.length === 0 && !from.familyIds?.length && from.clientId === undefined) return [];
  const { rows } = await db.query<{ jti: string; exp: string }>(
    // Each starting point is its own branch, so each reads through its index (subject_jti, family, client_id).
    `WITH RECURSIVE roots (jti) AS (
       SELECT unnest($1::uuid[])
       UNION SELECT f.jti FROM platform.issuance_audit f
              WHERE f.family_id = ANY($2::uuid[]) AND f.expires_at > now()
     ),
     d (jti, expires_at, depth) AS (
       SELECT a.jti, a.expires_at, 1 FROM platform.issuance_audit a
        WHERE a.subject_jti IN (SELECT jti FROM roots) AND a.connection IS NULL AND a.expires_at > now()
       UNION ALL
       SELECT a.jti, a.expires_at, 1 FROM platform.issuance_audit a
        WHERE a.client_id = $3 AND a.subject_jti IS NOT NULL AND a.connection IS NULL AND a.expires_at > now()
       UNION ALL
       SELECT a.jti, a.expires_at, d.depth + 1 FROM platform.issuance_audit a JOIN d ON a.subject_jti = d.jti
        WHERE a.connection IS NULL AND a.expires_at > now() AND d.depth <= $5
     )
     INSERT INTO platform.revocations (kind, value, known, expires_at, revoked_by)
     SELECT DISTINCT ON (d.jti) 'jti', d.jti::text, true, d.expires_at, $4 FROM d
      WHERE NOT EXISTS (SELECT 1 FROM platform.revocations v WHERE v.kind = 'jti' AND v.value = d.jti::text)
     RETURNING value AS jti, extract(epoch FROM expires_at)::bigint AS exp`,
    [jtis, from.familyIds ?? [], from.clientId ?? null, by, MAX_EXCHANGE_DEPTH],
  );
  return rows.map((r) => ({ jti: r.jti, exp: Number(r.exp) }));
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Runs `fn` over `items` with at most 16 at a time (a large denylist written without flooding Redis). */
async function eachBounded<T>(items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  const worker = async () => {
    for (let x = queue.shift(); x !== undefined; x = queue.shift()) await fn(x);
  };
  await Promise.all(Array.from({ length: Math.min(16, items.length) }, worker));
}

export function createRevocationService(o: RevocationServiceOptions): RevocationService {
  const { pool, publisher, log } = o;

  /**
   * Postgres holds the revocation already; a failed publication is made by the replay that runs when Redis
   * returns (keepDenylistRestored). False when it could not be published now.
   */
  async function published(what: string, fn: () => Promise<void>): Promise<boolean> {
    try {
      await fn();
      return true;
    } catch (err) {
      log.warn(
        { err: { message: (err as Error).message }, what },
        'revocation recorded; Redis is unreachable, it is published when Redis is back',
      );
      return false;
    }
  }

  /** As `published`, for callers whose answer cannot say so: a 503 naming Redis (the revocation stands). */
  async function publish(what: string, fn: () => Promise<void>): Promise<void> {
    if (!(await published(what, fn))) throw new TemporarilyUnavailableError(NOT_PUBLISHED);
  }

  /**
   * The cascade of a revocation that has committed: the tokens exchanged from it denied (in Postgres) and
   * published. False when Redis could not take them now (the replay publishes them when it is back).
   */
  async function cascade(from: ExchangedFrom, by: string): Promise<boolean> {
    const jtis = await denyExchanged(pool, from, by);
    if (jtis.length === 0) return true;
    const sent = await published('exchanged tokens', () =>
      eachBounded(jtis, (j) => publisher.denyJti(j.jti, j.exp)),
    );
    log.info({ exchangedTokens: jtis.length, by }, 'tokens exchanged from a revoked one revoked');
    return sent;
  }

  const userIdsByEmail = o.usersTable
    ? `SELECT id::text AS id FROM ${o.usersTable} WHERE lower(trim(email)) = $1`
    : undefined;

  /**
   * revoke-user (and block): one transaction that first takes the user's lock exclusively, so every issuance
   * from a code already under way has committed and none starts until this commits; then consumes the open
   * codes, revokes the families (waiting for rotations in flight) and records the cut-offs last.
   */
  async function revokeUser(email: string, by: string, block: true): Promise<BlockResult>;
  async function revokeUser(email: string, by: string, block: false): Promise<RevokeUserResult>;
  async function revokeUser(email: string, by: string, block: boolean): Promise<BlockResult> {
    const e = email.trim().toLowerCase();
    const result = await inTransaction(pool, async (tx) => {
      await tx.query(`SELECT ${userLockExclusive('$1::text')}`, [e]);
      const created = block
        ? ((
            await tx.query(
              `INSERT INTO platform.user_blocks (email, blocked_by) VALUES ($1, $2) ON CONFLICT (email) DO NOTHING`,
              [e, by],
            )
          ).rowCount ?? 0) === 1
        : false;
      const userIds = userIdsByEmail
        ? (await tx.query<{ id: string }>(userIdsByEmail, [e])).rows.map((r) => r.id)
        : [];
      const codes = await tx.query(
        `UPDATE platform.oauth_codes SET consumed_at = now(), revoked_at = now()
          WHERE consumed_at IS NULL AND expires_at > now() AND (email = $1 OR user_id = ANY($2))`,
        [e, userIds],
      );
      const devices = await tx.query(
        `UPDATE platform.device_codes SET consumed_at = now(), revoked_at = now()
          WHERE status = 'approved' AND consumed_at IS NULL AND expires_at > now() AND (email = $1 OR user_id = ANY($2))`,
        [e, userIds],
      );
      const { rows: subs } = await tx.query<{ subject: string }>(
        `SELECT subject FROM platform.refresh_families WHERE revoked_at IS NULL AND (email = $1 OR user_id = ANY($2))
         UNION SELECT subject FROM platform.issuance_audit
                WHERE email = $1 AND issued_at > now() - make_interval(secs => $3)
         UNION SELECT subject FROM platform.oauth_codes WHERE revoked_at IS NOT NULL AND (email = $1 OR user_id = ANY($2))
                  AND expires_at > now()`,
        [e, userIds, RECENT_ISSUANCE_SECONDS],
      );
      const found = subs.map((r) => r.subject);
      const families = await o.refreshTokens.revokeFamilies(
        tx,
        { email: e, userIds, subjects: found },
        block ? 'blocked' : 'revoke-user',
      );
      const subjects = [...new Set([...found, ...families.subjects])].sort();
      const cutoff = await recordCutoffs(tx, e, subjects, by);
      return {
        email: e,
        cutoff,
        subjects,
        refreshFamilies: families.familyIds.length,
        codes: (codes.rowCount ?? 0) + (devices.rowCount ?? 0),
        created,
      };
    });
    // An administrator can revoke while Redis is away: the answer says whether the gateways have it yet.
    const sent = await published('user', async () => {
      await publisher.denyEmail(e, result.cutoff);
      for (const s of result.subjects) await publisher.denySubject(s, result.cutoff);
    });
    log.info({ email: e, subjects: result.subjects, by, block }, block ? 'user blocked' : 'user revoked');
    return { ...result, published: sent };
  }

  return {
    async revokeToken({ jti, by, exp }) {
      const id = jti.toLowerCase();
      let expiry = exp;
      let known = exp !== undefined;
      if (!known && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) {
        const { rows } = await pool.query<{ exp: string }>(
          'SELECT extract(epoch FROM expires_at)::bigint AS exp FROM platform.issuance_audit WHERE jti = $1::uuid',
          [id],
        );
        if (rows[0]) {
          known = true;
          expiry = Number(rows[0].exp);
        }
      }
      // An id we never issued may be another issuer's (an Entra `uti`, a service's HS256 jti): still denied,
      // for as long as any token we accept can live, and reported as unknown.
      const until = expiry ?? nowSeconds() + UNKNOWN_JTI_DENY_SECONDS;
      await pool.query(
        `INSERT INTO platform.revocations (kind, value, known, expires_at, revoked_by)
         VALUES ('jti', $1, $2, to_timestamp($3), $4)`,
        [id, known, until, by],
      );
      const sent = await published('jti', () => publisher.denyJti(id, until));
      log.info({ jti: id, known, by }, 'token revoked');
      const cascaded = known ? await cascade({ jtis: [id] }, by) : true;
      return { jti: id, known, expiresAt: new Date(until * 1000), published: sent && cascaded };
    },

    revokeUser: ({ email, by }) => revokeUser(email, by, false),

    async block({ email, by }) {
      return revokeUser(email, by, true);
    },

    async unblock({ email }) {
      const { rowCount } = await pool.query('DELETE FROM platform.user_blocks WHERE email = $1', [
        email.trim().toLowerCase(),
      ]);
      return rowCount === 1;
    },

    async cutOff({ email, subjects, by }) {
      // Called after the ungrant committed: the clock is read after it (docs/idp.md § Revocation).
      const e = email.trim().toLowerCase();
      const cutoff = await recordCutoffs(pool, e, subjects, by);
      await publish('cut-off', async () => {
        await publisher.denyEmail(e, cutoff);
        for (const s of subjects) await publisher.denySubject(s, cutoff);
      });
      log.info({ email: e, subjects, by }, 'live tokens cut off');
      return { cutoff };
    },

    async revokeClient({ clientId, by }) {
      const cutoff = await inTransaction(pool, async (tx) => {
        const r = await tx.query(
          `UPDATE platform.machine_clients SET revoked_at = COALESCE(revoked_at, now()),
                  revoked_by = COALESCE(revoked_by, $2) WHERE client_id = $1`,
          [clientId, by],
        );
        if (r.rowCount !== 1) return undefined;
        const { rows } = await tx.query<{ cutoff: string }>(
          `WITH c AS (SELECT floor(extract(epoch FROM clock_timestamp()))::bigint AS cutoff)
           INSERT INTO platform.revocations (kind, value, cutoff, expires_at, revoked_by)
           SELECT 'sub', $1, c.cutoff, to_timestamp(c.cutoff + $2), $3 FROM c RETURNING cutoff`,
          [clientId, SUB_CUTOFF_TTL_SECONDS, by],
        );
        return Number(rows[0]!.cutoff);
      });
      if (cutoff === undefined) return undefined;
      await publish('client', () => publisher.denySubject(clientId, cutoff));
      log.info({ clientId, by }, 'machine client revoked');
      // The tokens it got for users by exchange carry the users' subjects, not its own: denied by jti.
      if (!(await cascade({ clientId }, by))) throw new TemporarilyUnavailableError(NOT_PUBLISHED);
      return { cutoff };
    },

    async revokeFamily({ familyId, by, reason, quiet }) {
      const { tokens, jtis } = await inTransaction(pool, async (tx) => {
        const f = await o.refreshTokens.revokeFamilies(
          tx,
          { familyIds: [familyId] },
          reason ?? `revoked by ${by}`,
        );
        // After the family rows: every access token a rotation committed before the lock is in the audit now.
        return { tokens: f.tokens, jtis: await denyFamilyAccessTokens(tx, [familyId], by) };
      });
      const send = () => eachBounded(jtis, (j) => publisher.denyJti(j.jti, j.exp));
      if (quiet) {
        await send().catch((err: Error) =>
          log.warn({ err: { message: err.message }, familyId }, 'sign-in revoked, not yet published'),
        );
      } else {
        await publish('sign-in', send);
      }
      log.info({ familyId, by, accessTokens: jtis.length }, 'sign-in revoked');
      if (!(await cascade({ familyIds: [familyId] }, by)) && !quiet)
        throw new TemporarilyUnavailableError(NOT_PUBLISHED);
      return tokens;
    },

    async isRevoked(c) {
      const { rows } = await pool.query<{ revoked: boolean }>({
        name: 'revocation_check',
        text: `SELECT EXISTS (
                 SELECT 1 FROM platform.revocations
                  WHERE expires_at > now()
                    AND ((kind = 'jti' AND value = $1)
                      OR (kind = 'sub' AND value = $2 AND cutoff >= $4)
                      OR (kind = 'email' AND value = $3 AND cutoff >= $4)))
               OR EXISTS (SELECT 1 FROM platform.user_blocks WHERE email = $3) AS revoked`,
        values: [c.jti.toLowerCase(), c.sub, (c.email ?? '').trim().toLowerCase(), c.iat],
      });
      return rows[0]?.revoked === true;
    },

    async replay() {
      const { rows } = await pool.query<{ kind: string; value: string; cutoff: string | null; exp: string }>(
        `SELECT kind, value, max(cutoff) AS cutoff, extract(epoch FROM max(expires_at))::bigint AS exp
           FROM platform.revocations WHERE expires_at > now() GROUP BY kind, value`,
      );
      await eachBounded(rows, async (r) => {
        if (r.kind === 'jti') await publisher.denyJti(r.value, Number(r.exp));
        else if (r.kind === 'sub') await publisher.denySubject(r.value, Number(r.cutoff));
        else if (r.kind === 'email') await publisher.denyEmail(r.value, Number(r.cutoff));
      });
      return rows.length;
    },
  };
}

/** How often each IdP checks that Redis still holds the denylist (the contract's bound is 5 s). */
export const RESTORE_CHECK_MS = 1000;

/**
 * Keeps the denylist in Redis restored: every RESTORE_CHECK_MS the marker key is looked up; when it is missing,
 * Redis lost its data, so the marker is set and every recorded revocation written again and published (running
 * gateways' mirrors get the events, gateways started later read the keys). The marker is set before the replay,
 * so a loss during the replay removes it again and the next check replays again; a failed replay removes it.
 * `check(true)` replays whatever the marker says: at start-up and at every (re)connection or failover, when a
 * publication may have failed while Redis was away, or the master that acknowledged it did not replicate it. A
 * forced replay is owed until one succeeds: asked for while another check runs, or failing (the promoted master
 * not writable yet, the cluster still moving slots), it is made by the next check, marker or not; otherwise the
 * marker the old master replicated would hide the loss for good. Replicas may replay together: writes only ever
 * move a cut-off later.
 */
export function keepDenylistRestored(o: {
  redis: RedisClient;
  issuer: string;
  replay: () => Promise<number>;
  log: Logger;
}): { check: (force?: boolean) => Promise<void>; stop: () => void } {
  const key = revocationsRestoredKey(o.issuer);
  let running: Promise<void> | undefined;
  let owed = false;
  const once = async () => {
    const forced = owed;
    owed = false;
    try {
      const set = await o.redis.set(key, new Date().toISOString(), 'NX');
      if (set !== 'OK' && !forced) return;
      try {
        const n = await o.replay();
        o.log.info({ entries: n }, 'revocations replayed to the denylist');
      } catch (err) {
        await o.redis.del(key).catch(() => {});
        throw err;
      }
    } catch (err) {
      if (forced) owed = true;
      throw err;
    }
  };
  const check = (force = false): Promise<void> => {
    if (force) owed = true;
    if (running) return force ? running.then(() => check()) : running;
    running = once()
      .catch((err: Error) =>
        o.log.warn({ err: { message: err.message } }, 'revocations could not be replayed yet'),
      )
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  const timer = setInterval(() => {
    if (o.redis.status === 'ready') void check();
  }, RESTORE_CHECK_MS);
  timer.unref();
  return { check, stop: () => clearInterval(timer) };
}
