import { InvalidRequestError } from '../errors.ts';
import type { AdminHandler } from './route-table.ts';

// A token id as issuers write them: printable, no white space (Entra `uti`s are base64url, ours are UUIDs).
const TOKEN_ID = /^[\x21-\x7E]{1,256}$/;
export const EMAIL = /^[^\s@\p{Cc}]{1,200}@[^\s@\p{Cc}]{1,200}$/u;

/**
 * POST /admin/api/revoke-token {"jti"} → {"jti","known","revoked","expires_at","published"}. `published: false`:
 * Redis is unreachable; the revocation is recorded and the IdP refuses the token, the gateways get it when Redis
 * is back.
 */
export const revokeTokenRoute: AdminHandler = async ({ ctx, body: read, admin }) => {
  const body = await read();
  if (typeof body.jti !== 'string' || !TOKEN_ID.test(body.jti))
    throw new InvalidRequestError('jti must be a token id: 1-256 printable characters without white space');
  const r = await ctx.revocation.revokeToken({ jti: body.jti, by: `admin:${admin.email}` });
  const out = {
    jti: r.jti,
    known: r.known,
    revoked: true,
    expires_at: r.expiresAt.toISOString(),
    published: r.published,
  };
  return { body: out, audit: { target: r.jti, detail: out } };
};

/** POST /admin/api/revoke-user {"email"} → {"email","cutoff","subjects","refresh_families","codes","published"}. */
export const revokeUserRoute: AdminHandler = async ({ ctx, body: read, admin }) => {
  const body = await read();
  const email = typeof body.email === 'string' ? body.email.trim().toLowerCase() : undefined;
  if (!email || !EMAIL.test(email)) throw new InvalidRequestError('email must be an email address');
  const r = await ctx.revocation.revokeUser({ email, by: `admin:${admin.email}` });
  const out = {
    email: r.email,
    cutoff: r.cutoff,
    subjects: r.subjects,
    refresh_families: r.refreshFamilies,
    codes: r.codes,
    published: r.published,
  };
  return { body: out, audit: { target: r.email, email: r.email, detail: out } };
};
