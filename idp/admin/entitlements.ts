import type { Grantee, GrantRecord } from '../entitlements/entitlements.ts';
import { InvalidRequestError } from '../errors.ts';
import { EMAIL } from './revoke.ts';
import type { AdminHandler } from './route-table.ts';

// /admin/api/entitlements (docs/idp.md § Entitlements):
//   GET    ?email=E              → {"mode", "items": [grant…]} or, with email, that user's roles, grants, services
//   POST   {"service", "email"|"role"}              → {"service", "email"|"role", "granted": true, "created"}
//   DELETE ?service=S&email=E | ?service=S&role=R   → {"service", "email"|"role", "removed", "cutoff", "subjects"}

const ROLE = /^[^\p{Cc}]{1,200}$/u;

function grantJson(g: GrantRecord) {
  return {
    service: g.service,
    email: g.email,
    role: g.role,
    granted_by: g.grantedBy,
    granted_at: g.grantedAt,
  };
}

function target(
  services: readonly string[],
  input: Record<string, unknown>,
): { service: string; who: Grantee } {
  const { service, email, role } = input;
  if (typeof service !== 'string' || !services.includes(service)) {
    throw new InvalidRequestError(`service must be one of ${services.join(', ')}`);
  }
  if ((email === undefined) === (role === undefined))
    throw new InvalidRequestError('give exactly one of email or role');
  if (email !== undefined) {
    const e = typeof email === 'string' ? email.trim().toLowerCase() : '';
    if (!EMAIL.test(e)) throw new InvalidRequestError('email must be an email address');
    return { service, who: { email: e } };
  }
  const r = typeof role === 'string' ? role.trim() : '';
  if (!ROLE.test(r))
    throw new InvalidRequestError('role must be 1-200 characters without control characters');
  return { service, who: { role: r } };
}

const whoJson = (who: Grantee) => (who.email !== undefined ? { email: who.email } : { role: who.role });
const whoText = (service: string, who: Grantee) =>
  `${service}:${who.email !== undefined ? who.email : `role:${who.role}`}`;

export const listEntitlementsRoute: AdminHandler = async ({ ctx, query }) => {
  const { entitlements } = ctx;
  const email = query.get('email')?.trim().toLowerCase();
  if (email === undefined || email === '') {
    const items = (await entitlements.list()).map(grantJson);
    return { body: { mode: entitlements.mode, items }, audit: { detail: { count: items.length } } };
  }
  if (!EMAIL.test(email)) throw new InvalidRequestError('email must be an email address');
  const u = await entitlements.forEmail(email);
  const body = {
    mode: entitlements.mode,
    email: u.email,
    user_ids: u.userIds,
    roles: u.roles,
    services: u.services,
    grants: u.grants.map(grantJson),
  };
  return { body, audit: { target: email, email } };
};

export const grantRoute: AdminHandler = async ({ ctx, body: read, admin }) => {
  const { service, who } = target(ctx.config.services, await read());
  const r = await ctx.entitlements.grant(service, who, admin.email);
  const body = { service, ...whoJson(who), granted: true, created: r.created };
  return { body, audit: { target: whoText(service, who), email: who.email, detail: body } };
};

export const ungrantRoute: AdminHandler = async ({ ctx, query: q, admin }) => {
  const input: Record<string, unknown> = {};
  for (const k of ['service', 'email', 'role']) if (q.has(k)) input[k] = q.get(k);
  const { service, who } = target(ctx.config.services, input);
  const r = await ctx.entitlements.ungrant(service, who, admin.email);
  const body = { service, ...whoJson(who), removed: r.removed, cutoff: r.cutoff, subjects: r.subjects };
  return { body, audit: { target: whoText(service, who), email: who.email, detail: body } };
};
