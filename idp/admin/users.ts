import type { Pool } from '../../lib/db.ts';
import { ident } from '../../lib/db.ts';
import { InvalidRequestError, NotFoundError } from '../errors.ts';
import { EMAIL } from './revoke.ts';
import type { AdminHandler } from './route-table.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function emailParam(value: string | undefined): string {
  const email = value?.trim().toLowerCase();
  if (!email || !EMAIL.test(email)) throw new InvalidRequestError('the path must name an email address');
  return email;
}

interface SignInRow {
  id: string;
  client_id: string;
  created_at: Date;
  last_used_at: Date;
}

/**
 * A user's live sign-ins: refresh-token families with a current token (not rotated out, revoked or expired).
 * Created = the sign-in; last used = the newest token of the family (each refresh adds one).
 */
async function signIns(pool: Pool, email: string): Promise<SignInRow[]> {
  const { rows } = await pool.query<SignInRow>(
    `SELECT family_id::text AS id, min(client_id) AS client_id, min(created_at) AS created_at,
            max(created_at) AS last_used_at
       FROM platform.refresh_tokens
      WHERE family_id IN (SELECT family_id FROM platform.refresh_tokens WHERE email = $1 AND revoked_at IS NULL)
      GROUP BY family_id
     HAVING bool_or(revoked_at IS NULL AND rotated_to IS NULL AND expires_at > now())
      ORDER BY max(created_at) DESC`,
    [email],
  );
  return rows;
}

async function subjects(pool: Pool, email: string): Promise<string[]> {
  const { rows } = await pool.query<{ subject: string }>(
    `SELECT subject FROM platform.refresh_tokens WHERE email = $1
     UNION SELECT subject FROM platform.issuance_audit WHERE email = $1
     ORDER BY 1`,
    [email],
  );
  return rows.map((r) => r.subject);
}

/** Whether the web application has a user with this email (false when its users table is not there). */
async function userExists(pool: Pool, usersTable: string, email: string): Promise<boolean> {
  const { rows } = await pool.query<{ found: boolean | null }>(
    `SELECT CASE WHEN to_regclass($1) IS NULL THEN NULL ELSE true END AS found`,
    [ident(usersTable)],
  );
  if (rows[0]?.found !== true) return false;
  const r = await pool.query(`SELECT 1 FROM ${ident(usersTable)} WHERE lower(email) = $1 LIMIT 1`, [email]);
  return (r.rowCount ?? 0) > 0;
}

/** GET /admin/api/users/:email → {"email", "blocked", "subjects", "sign_ins", "consents"} (each consent's services and scopes). */
export const userRoute: AdminHandler = async ({ ctx, params }) => {
  const email = emailParam(params.email);
  const [subs, sessions, consents, block] = await Promise.all([
    subjects(ctx.pool, email),
    signIns(ctx.pool, email),
    ctx.consents.list({ email }),
    ctx.blocks.find(email),
  ]);
  if (
    subs.length === 0 &&
    consents.length === 0 &&
    !block &&
    !(await userExists(ctx.pool, ctx.config.authjs.usersTable, email))
  ) {
    throw new NotFoundError(`no user with the email ${email}`);
  }
  return {
    body: {
      email,
      blocked: block ? { blocked_by: block.blockedBy, blocked_at: block.blockedAt.toISOString() } : null,
      subjects: subs,
      sign_ins: sessions.map((s) => ({
        id: s.id,
        client_id: s.client_id,
        created_at: s.created_at.toISOString(),
        last_used_at: s.last_used_at.toISOString(),
      })),
      consents: consents.map((c) => ({
        client_id: c.clientId,
        client_name: c.clientName,
        services: c.services,
        scopes: c.scopes,
        granted_at: c.grantedAt.toISOString(),
      })),
    },
    audit: { target: email, email },
  };
};

/**
 * DELETE /admin/api/sign-ins/:id → {"id", "revoked": true}: the refresh-token family is revoked, so the client
 * can no longer refresh; access tokens already issued from it expire within their hour (revoke-user, or
 * revoke-token with their jti, cut them at once). Revoking a revoked sign-in again answers the same.
 */
export const revokeSignInRoute: AdminHandler = async ({ ctx, params, admin }) => {
  const id = params.id ?? '';
  if (!UUID.test(id))
    throw new InvalidRequestError('a sign-in id is a UUID, as `GET /admin/api/users/<email>` lists it');
  const { rows } = await ctx.pool.query<{ email: string; client_id: string }>(
    'SELECT email, client_id FROM platform.refresh_tokens WHERE family_id = $1 LIMIT 1',
    [id],
  );
  if (!rows[0]) throw new NotFoundError(`no sign-in with the id ${id}`);
  const tokens = await ctx.revocation.revokeFamily({ familyId: id, by: `admin:${admin.email}` });
  return {
    body: { id: id.toLowerCase(), revoked: true },
    audit: {
      target: id.toLowerCase(),
      email: rows[0].email,
      detail: { email: rows[0].email, client_id: rows[0].client_id, tokens },
    },
  };
};

/**
 * DELETE /admin/api/consents/:email/:client_id → {"email", "client_id", "withdrawn": true}. The client must ask
 * again at its next authorization; and since a withdrawn consent should not leave the client refreshing for
 * another month, the user's sign-ins with that client are revoked too (`sign_ins_revoked`).
 */
export const withdrawConsentRoute: AdminHandler = async ({ ctx, params, admin }) => {
  const email = emailParam(params.email);
  const clientId = params.client_id ?? '';
  if (!clientId || clientId.length > 2048) throw new InvalidRequestError('the path must name a client_id');
  if (!(await ctx.consents.withdraw({ email, clientId })))
    throw new NotFoundError(`${email} has no consent to ${clientId}`);
  const { rows } = await ctx.pool.query<{ family_id: string }>(
    `SELECT DISTINCT family_id::text FROM platform.refresh_tokens
      WHERE email = $1 AND client_id = $2 AND revoked_at IS NULL`,
    [email, clientId],
  );
  for (const r of rows) {
    await ctx.revocation.revokeFamily({
      familyId: r.family_id,
      by: `admin:${admin.email}`,
      reason: 'consent withdrawn',
    });
  }
  const out = { email, client_id: clientId, withdrawn: true, sign_ins_revoked: rows.length };
  return { body: out, audit: { target: email, email, detail: out } };
};

const SEARCH_MAX = 20;

/**
 * GET /admin/api/users?email=<part> → {"items": [{"email"}]}: up to 20 users of the web application whose email
 * contains <part> (case-insensitive), exact match first, then alphabetical.
 */
export const searchUsersRoute: AdminHandler = async ({ ctx, query }) => {
  for (const k of query.keys())
    if (k !== 'email') throw new InvalidRequestError(`unknown parameter ${k}; known: email`);
  const part = query.get('email')?.trim().toLowerCase() ?? '';
  if (part.length < 2 || part.length > 320 || /[\p{Cc}\s]/u.test(part))
    throw new InvalidRequestError('email must be 2-320 characters of an email address, without spaces');
  const table = ctx.config.authjs.usersTable;
  const { rows: found } = await ctx.pool.query<{ found: boolean | null }>(
    `SELECT CASE WHEN to_regclass($1) IS NULL THEN NULL ELSE true END AS found`,
    [ident(table)],
  );
  let items: Array<{ email: string }> = [];
  if (found[0]?.found === true) {
    const like = `%${part.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    const { rows } = await ctx.pool.query<{ email: string }>(
      `SELECT email FROM (SELECT DISTINCT lower(email) AS email FROM ${ident(table)} WHERE lower(email) LIKE $1) m
        ORDER BY email = $2 DESC, email LIMIT $3`,
      [like, part, SEARCH_MAX],
    );
    items = rows;
  }
  return { body: { items }, audit: { detail: { query: part, found: items.length } } };
};
