import { createHash } from 'node:crypto';
import { ident, type Pool } from '../../lib/db.ts';
import type { IdpConfig } from '../config.ts';

export interface SessionUser {
  userId: string;
  email: string;
  /** The Entra object id (providerAccountId of the subject provider's account), else the user id. */
  sub: string;
  /** users."emailVerified" is set: the id_token's email_verified. */
  emailVerified: boolean;
}

/** When the session's user signed in, as far as the provider knows (docs/idp.md § Login freshness). */
export interface SignIn {
  /** Unix seconds: when the provider first saw the session. */
  authTime: number;
  /** True: the sign-in was seen happening (exact); false: the session was first seen then (signed in at or before). */
  known: boolean;
  /**
   * False: a return from the sign-in page cannot show that the user signed in again. An Auth.js JWT session
   * without an `auth_time` claim: Auth.js re-issues its cookie whenever the session is read, so a new cookie is
   * no evidence of a new sign-in (session/freshness.ts then refuses, never assumes). Absent: true.
   */
  observable?: boolean;
}

export interface WebSessionRecord {
  user: SessionUser;
  signIn: SignIn;
}

export interface SessionStore {
  /**
   * The session's user and sign-in. A session the provider has not seen before is recorded now, `known` when the
   * caller saw the browser come back from the sign-in page (`returningFromSignIn`).
   */
  findBySessionToken(
    token: string,
    o?: { returningFromSignIn?: boolean },
  ): Promise<WebSessionRecord | undefined>;
  /** The users with this email (lowercased, trimmed): usually one; an assertion grant needs exactly one. */
  findUsersByEmail(email: string): Promise<SessionUser[]>;
  /**
   * An Auth.js JWT-strategy session's user and sign-in (session/authjs-jwt.ts has decrypted it): the one user
   * with its email, or, when several share it, the one whose id is its `sub`. `token` is the cookie's value,
   * recorded (hashed) as a database session's token is, until `exp`.
   */
  findByJwtSession(
    session: { email: string; sub: string | undefined; exp: number; authTime: number | undefined },
    token: string,
  ): Promise<WebSessionRecord | undefined>;
}

/** The key of a session in platform.web_session_logins: the token itself is never stored. */
export function sessionHash(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

/** Reads the web application's Auth.js database session (docs/idp.md § Storage). */
export function createSessionStore(pool: Pool, authjs: IdpConfig['authjs']): SessionStore {
  const text = `
    SELECT u.id::text AS user_id, lower(trim(u.email)) AS email, u."emailVerified" IS NOT NULL AS email_verified,
           (SELECT a."providerAccountId" FROM ${ident(authjs.accountsTable)} a
             WHERE a."userId" = u.id AND a.provider = $2 ORDER BY a.id LIMIT 1) AS provider_sub,
           s.expires, l.auth_time, l.known, l.expires_at < s.expires - interval '1 day' AS stale
      FROM ${ident(authjs.sessionsTable)} s
      JOIN ${ident(authjs.usersTable)} u ON u.id = s."userId"
      LEFT JOIN platform.web_session_logins l ON l.session_hash = $3
     WHERE s."sessionToken" = $1 AND s.expires > now()`;
  const byEmail = `
    SELECT u.id::text AS user_id, lower(trim(u.email)) AS email, u."emailVerified" IS NOT NULL AS email_verified,
           (SELECT a."providerAccountId" FROM ${ident(authjs.accountsTable)} a
             WHERE a."userId" = u.id AND a.provider = $2 ORDER BY a.id LIMIT 1) AS provider_sub
      FROM ${ident(authjs.usersTable)} u
     WHERE lower(trim(u.email)) = $1
     ORDER BY u.id LIMIT 2`;
  const store: SessionStore = {
    async findByJwtSession(session, token) {
      const users = await store.findUsersByEmail(session.email);
      const user = users.length === 1 ? users[0] : users.find((u) => u.userId === session.sub);
      if (!user) return undefined;
      // The application says when the user signed in: exact, nothing to record.
      if (session.authTime !== undefined)
        return { user, signIn: { authTime: session.authTime, known: true } };
      // Seen before: its record; first sight: recorded now, never as a sign-in seen happening (a re-issued cookie
      // looks the same). Concurrent first sights agree on the row that won.
      const { rows } = await pool.query<{ auth_time: string; known: boolean }>({
        name: 'jwt_session_sign_in',
        text: `INSERT INTO platform.web_session_logins (session_hash, auth_time, known, expires_at)
               VALUES ($1, $4, $2, to_timestamp($3))
               ON CONFLICT (session_hash) DO UPDATE SET session_hash = EXCLUDED.session_hash
               RETURNING auth_time, known`,
        values: [sessionHash(token), false, session.exp, Math.floor(Date.now() / 1000)],
      });
      const r = rows[0]!;
      return { user, signIn: { authTime: Number(r.auth_time), known: r.known, observable: false } };
    },
    async findUsersByEmail(email) {
      const { rows } = await pool.query<{
        user_id: string;
        email: string;
        email_verified: boolean;
        provider_sub: string | null;
      }>(byEmail, [email.trim().toLowerCase(), authjs.subjectProvider]);
      return rows.map((r) => ({
        userId: r.user_id,
        email: r.email,
        sub: r.provider_sub || r.user_id,
        emailVerified: r.email_verified,
      }));
    },
    async findBySessionToken(token, o = {}) {
      if (!token || token.length > 512) return undefined;
      const hash = sessionHash(token);
      const { rows } = await pool.query<{
        user_id: string;
        email: string | null;
        email_verified: boolean;
        provider_sub: string | null;
        expires: Date;
        auth_time: string | null;
        known: boolean | null;
        stale: boolean | null;
      }>({
        name: 'session_user',
        text,
        values: [token, authjs.subjectProvider, hash],
      });
      const r = rows[0];
      // A user without an email cannot be vouched for: the token's one promise is the email.
      if (!r?.email) return undefined;
      const user = {
        userId: r.user_id,
        email: r.email,
        sub: r.provider_sub || r.user_id,
        emailVerified: r.email_verified,
      };
      if (r.auth_time !== null) {
        // Auth.js moves a session's expiry on as it is used; the record follows (at most once a day).
        if (r.stale)
          await pool.query('UPDATE platform.web_session_logins SET expires_at = $2 WHERE session_hash = $1', [
            hash,
            r.expires,
          ]);
        return { user, signIn: { authTime: Number(r.auth_time), known: r.known === true } };
      }
      // First sight. Concurrent first sights agree: the row that won is returned to both.
      const first = await pool.query<{ auth_time: string; known: boolean }>({
        name: 'session_first_seen',
        text: `INSERT INTO platform.web_session_logins (session_hash, auth_time, known, expires_at)
               VALUES ($1, $4, $2, $3)
               ON CONFLICT (session_hash) DO UPDATE SET session_hash = EXCLUDED.session_hash
               RETURNING auth_time, known`,
        // The provider's clock, as for the sign-in marker it is compared with (session/freshness.ts).
        values: [hash, o.returningFromSignIn === true, r.expires, Math.floor(Date.now() / 1000)],
      });
      const f = first.rows[0]!;
      return { user, signIn: { authTime: Number(f.auth_time), known: f.known } };
    },
  };
  return store;
}
