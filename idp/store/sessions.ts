import { ident, type Pool } from '../../lib/db.ts';
import type { IdpConfig } from '../config.ts';

export interface SessionUser {
  userId: string;
  email: string;
  /** The Entra object id (providerAccountId of the subject provider's account), else the user id. */
  sub: string;
}

export interface SessionStore {
  findBySessionToken(token: string): Promise<SessionUser | undefined>;
}

/** Reads the web application's Auth.js database session (docs/idp.md § Storage). */
export function createSessionStore(pool: Pool, authjs: IdpConfig['authjs']): SessionStore {
  const text = `
    SELECT u.id::text AS user_id, lower(trim(u.email)) AS email,
           (SELECT a."providerAccountId" FROM ${ident(authjs.accountsTable)} a
             WHERE a."userId" = u.id AND a.provider = $2 ORDER BY a.id LIMIT 1) AS provider_sub
      FROM ${ident(authjs.sessionsTable)} s
      JOIN ${ident(authjs.usersTable)} u ON u.id = s."userId"
     WHERE s."sessionToken" = $1 AND s.expires > now()`;
  return {
    async findBySessionToken(token) {
      if (!token || token.length > 512) return undefined;
      const { rows } = await pool.query<{
        user_id: string;
        email: string | null;
        provider_sub: string | null;
      }>({
        name: 'session_user',
        text,
        values: [token, authjs.subjectProvider],
      });
      const r = rows[0];
      // A user without an email cannot be vouched for: the token's one promise is the email.
      if (!r?.email) return undefined;
      return { userId: r.user_id, email: r.email, sub: r.provider_sub || r.user_id };
    },
  };
}
