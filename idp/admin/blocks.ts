import { InvalidRequestError } from '../errors.ts';
import { EMAIL } from './revoke.ts';
import type { AdminHandler } from './route-table.ts';

// Blocking a user (docs/idp.md § Blocking a user):
//   POST /admin/api/block   {"email"} → {"email", "blocked": true, "created", "cutoff", "subjects", "refresh_families", "codes"}
//   POST /admin/api/unblock {"email"} → {"email", "blocked": false, "removed"}
//   GET  /admin/api/blocks            → {"items": [{"email", "blocked_by", "blocked_at"}]}

async function emailOf(read: () => Promise<Record<string, unknown>>): Promise<string> {
  const body = await read();
  const email = typeof body.email === 'string' ? body.email.trim().toLowerCase() : undefined;
  if (!email || !EMAIL.test(email)) throw new InvalidRequestError('email must be an email address');
  return email;
}

export const blockRoute: AdminHandler = async ({ ctx, body, admin }) => {
  const email = await emailOf(body);
  const r = await ctx.revocation.block({ email, by: `admin:${admin.email}` });
  const out = {
    email: r.email,
    blocked: true,
    created: r.created,
    cutoff: r.cutoff,
    subjects: r.subjects,
    refresh_families: r.refreshFamilies,
    codes: r.codes,
    published: r.published,
  };
  return { body: out, audit: { target: r.email, email: r.email, detail: out } };
};

export const unblockRoute: AdminHandler = async ({ ctx, body }) => {
  const email = await emailOf(body);
  const removed = await ctx.revocation.unblock({ email });
  const out = { email, blocked: false, removed };
  return { body: out, audit: { target: email, email, detail: out } };
};

export const listBlocksRoute: AdminHandler = async ({ ctx }) => {
  const items = (await ctx.blocks.list()).map((b) => ({
    email: b.email,
    blocked_by: b.blockedBy,
    blocked_at: b.blockedAt.toISOString(),
  }));
  return { body: { items }, audit: { detail: { count: items.length } } };
};
