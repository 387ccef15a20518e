import type { Pool } from '../lib/db.ts';
import type { Logger } from '../lib/logger.ts';
import { type RevocationPublisher, SUB_CUTOFF_TTL_SECONDS } from '../lib/revocation.ts';
import { TemporarilyUnavailableError } from './errors.ts';

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
}

export interface RevokeUserResult {
  email: string;
  cutoff: number;
  subjects: string[];
  refreshFamilies: number;
  codes: number;
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
  /**
   * Cut-offs only (an ungrant): the subjects' and the email's live access tokens are refused; refresh tokens
   * stay valid, so the clients refresh and get what the user is entitled to now.
   */
  cutOff(o: { email: string; subjects: readonly string[]; by: string }): Promise<{ cutoff: number }>;
  /** One sign-in (refresh-token family); its access tokens live out their hour. Returns tokens revoked. */
  revokeFamily(o: { familyId: string; by: string; reason?: string }): Promise<number>;
  /** Whether a token this provider issued is revoked (jti, subject cut-off or email cut-off). */
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
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

export function createRevocationService(o: RevocationServiceOptions): RevocationService {
  const { pool, publisher, log } = o;

  /** Postgres holds the revocation already; a failed publication is retried by the next replay. */
  async function publish(what: string, fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      log.warn({ err: { message: (err as Error).message }, what }, 'revocation recorded, not yet published');
      throw new TemporarilyUnavailableError(
        'the revocation is recorded but could not be published to the gateways yet; it will be when the cache is back, retry to confirm',
      );
    }
  }

  const userIdsByEmail = o.usersTable
    ? `SELECT id::text AS id FROM ${o.usersTable} WHERE lower(trim(email)) = $1`
    : undefined;

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
      await publish('jti', () => publisher.denyJti(id, until));
      log.info({ jti: id, known, by }, 'token revoked');
      return { jti: id, known, expiresAt: new Date(until * 1000) };
    },

    async revokeUser({ email, by }) {
      const e = email.trim().toLowerCase();
      const cutoff = nowSeconds();
      const client = await pool.connect();
      let result: RevokeUserResult;
      try {
        await client.query('BEGIN');
        const userIds = userIdsByEmail
          ? (await client.query<{ id: string }>(userIdsByEmail, [e])).rows.map((r) => r.id)
          : [];
        const { rows: subs } = await client.query<{ subject: string }>(
          `SELECT subject FROM platform.refresh_tokens WHERE revoked_at IS NULL AND (email = $1 OR user_id = ANY($2))
           UNION SELECT subject FROM platform.issuance_audit
                  WHERE email = $1 AND issued_at > now() - make_interval(secs => $3)
           UNION SELECT subject FROM platform.oauth_codes WHERE consumed_at IS NULL AND (email = $1 OR user_id = ANY($2))`,
          [e, userIds, RECENT_ISSUANCE_SECONDS],
        );
        const subjects = subs.map((r) => r.subject).sort();
        const families = await client.query<{ family_id: string }>(
          `UPDATE platform.refresh_tokens SET revoked_at = now(), revoked_reason = 'revoke-user'
            WHERE revoked_at IS NULL AND (email = $1 OR user_id = ANY($2) OR subject = ANY($3))
        RETURNING family_id`,
          [e, userIds, subjects],
        );
        const codes = await client.query(
          `UPDATE platform.oauth_codes SET consumed_at = now(), revoked_at = now()
            WHERE consumed_at IS NULL AND expires_at > now() AND (email = $1 OR user_id = ANY($2))`,
          [e, userIds],
        );
        const until = cutoff + SUB_CUTOFF_TTL_SECONDS;
        await client.query(
          `INSERT INTO platform.revocations (kind, value, cutoff, expires_at, revoked_by)
           SELECT k, v, $3, to_timestamp($4), $5 FROM unnest($1::text[], $2::text[]) AS t(k, v)`,
          [['email', ...subjects.map(() => 'sub')], [e, ...subjects], cutoff, until, by],
        );
        await client.query('COMMIT');
        result = {
          email: e,
          cutoff,
          subjects,
          refreshFamilies: new Set(families.rows.map((r) => r.family_id)).size,
          codes: codes.rowCount ?? 0,
        };
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
      await publish('user', async () => {
        await publisher.denyEmail(e, cutoff);
        for (const s of result.subjects) await publisher.denySubject(s, cutoff);
      });
      log.info({ email: e, subjects: result.subjects, by }, 'user revoked');
      return result;
    },

    async cutOff({ email, subjects, by }) {
      const e = email.trim().toLowerCase();
      const cutoff = nowSeconds();
      await pool.query(
        `INSERT INTO platform.revocations (kind, value, cutoff, expires_at, revoked_by)
         SELECT k, v, $3, to_timestamp($4), $5 FROM unnest($1::text[], $2::text[]) AS t(k, v)`,
        [
          ['email', ...subjects.map(() => 'sub')],
          [e, ...subjects],
          cutoff,
          cutoff + SUB_CUTOFF_TTL_SECONDS,
          by,
        ],
      );
      await publish('cut-off', async () => {
        await publisher.denyEmail(e, cutoff);
        for (const s of subjects) await publisher.denySubject(s, cutoff);
      });
      log.info({ email: e, subjects, by }, 'live tokens cut off');
      return { cutoff };
    },

    async revokeFamily({ familyId, by, reason }) {
      const r = await pool.query(
        `UPDATE platform.refresh_tokens SET revoked_at = now(), revoked_reason = $2
          WHERE family_id = $1 AND revoked_at IS NULL`,
        [familyId, reason ?? `revoked by ${by}`],
      );
      log.info({ familyId, by }, 'sign-in revoked');
      return r.rowCount ?? 0;
    },

    async isRevoked(c) {
      const { rows } = await pool.query<{ revoked: boolean }>({
        name: 'revocation_check',
        text: `SELECT EXISTS (
                 SELECT 1 FROM platform.revocations
                  WHERE expires_at > now()
                    AND ((kind = 'jti' AND value = $1)
                      OR (kind = 'sub' AND value = $2 AND cutoff >= $4)
                      OR (kind = 'email' AND value = $3 AND cutoff >= $4))) AS revoked`,
        values: [c.jti.toLowerCase(), c.sub, (c.email ?? '').trim().toLowerCase(), c.iat],
      });
      return rows[0]?.revoked === true;
    },

    async replay() {
      const { rows } = await pool.query<{ kind: string; value: string; cutoff: string | null; exp: string }>(
        `SELECT kind, value, max(cutoff) AS cutoff, extract(epoch FROM max(expires_at))::bigint AS exp
           FROM platform.revocations WHERE expires_at > now() GROUP BY kind, value`,
      );
      // Bounded concurrency: a large denylist is replayed quickly without flooding the connection.
      const queue = [...rows];
      const worker = async () => {
        for (let r = queue.shift(); r; r = queue.shift()) {
          if (r.kind === 'jti') await publisher.denyJti(r.value, Number(r.exp));
          else if (r.kind === 'sub') await publisher.denySubject(r.value, Number(r.cutoff));
          else if (r.kind === 'email') await publisher.denyEmail(r.value, Number(r.cutoff));
        }
      };
      await Promise.all(Array.from({ length: Math.min(16, rows.length) }, worker));
      return rows.length;
    },
  };
}
