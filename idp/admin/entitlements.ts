import type { Grantee, GrantRecord } from '../entitlements/entitlements.ts';
import {
  ENTITY_KEY,
  ENTITY_PERMISSIONS,
  type EntityGrantRecord,
  type EntityPermission,
} from '../entity-grants/entity-grants.ts';
import { InvalidRequestError } from '../errors.ts';
import { EMAIL } from './revoke.ts';
import type { AdminHandler } from './route-table.ts';

// /admin/api/entitlements (docs/idp.md § Entitlements, § Entity grants):
//   GET    ?email=E              → {"mode", "items": [grant…], "entities": [entity grant…]} or, with email, that
//                                   user's roles, grants, services and entity grants
//   POST   {"service", "email"|"role"}              → {"service", "email"|"role", "granted": true, "created", "mode"}
//   POST   {"entity", "permission", "email"|"role"} → {"entity", "permission", "email"|"role", "granted", "created"}
//   DELETE ?service=S&email=E | ?service=S&role=R   → {"service", "email"|"role", "removed", "cutoff", "subjects", "mode"}
//   DELETE ?entity=E[&permission=P]&email=E|role=R  → {"entity", "permission", "email"|"role", "removed", …}

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

function grantee(input: Record<string, unknown>): Grantee {
  const { email, role } = input;
  if ((email === undefined) === (role === undefined))
    throw new InvalidRequestError('give exactly one of email or role');
  if (email !== undefined) {
    const e = typeof email === 'string' ? email.trim().toLowerCase() : '';
    if (!EMAIL.test(e)) throw new InvalidRequestError('email must be an email address');
    return { email: e };
  }
  const r = typeof role === 'string' ? role.trim() : '';
  if (!ROLE.test(r))
    throw new InvalidRequestError('role must be 1-200 characters without control characters');
  return { role: r };
}

function entityTarget(
  input: Record<string, unknown>,
  permissionRequired: boolean,
): { entity: string; permission: EntityPermission | undefined; who: Grantee } {
  const { entity, permission } = input;
  if (typeof entity !== 'string' || !ENTITY_KEY.test(entity)) {
    throw new InvalidRequestError(
      'entity must be 1-200 characters: letters, digits and . _ : / @ + - (starting with a letter or digit)',
    );
  }
  if (permission === undefined && !permissionRequired) return { entity, permission, who: grantee(input) };
  if (!(ENTITY_PERMISSIONS as readonly unknown[]).includes(permission))
    throw new InvalidRequestError('permission must be read or write');
  return { entity, permission: permission as EntityPermission, who: grantee(input) };
}

function entityJson(g: EntityGrantRecord) {
  return {
    entity: g.entity,
    permission: g.permission,
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
  if (input.entity !== undefined) throw new InvalidRequestError('give either service or entity, not both');
  if (typeof service !== 'string' || !services.includes(service)) {
    throw new InvalidRequestError(`service must be one of ${services.join(', ')}`);
  }
  return { service, who: grantee({ email, role }) };
}

const whoJson = (who: Grantee) => (who.email !== undefined ? { email: who.email } : { role: who.role });
const whoText = (service: string, who: Grantee) =>
  `${service}:${who.email !== undefined ? who.email : `role:${who.role}`}`;

const entityText = (entity: string, who: Grantee) =>
  `entity:${entity}:${who.email !== undefined ? who.email : `role:${who.role}`}`;

export const listEntitlementsRoute: AdminHandler = async ({ ctx, query }) => {
  const { entitlements } = ctx;
  const email = query.get('email')?.trim().toLowerCase();
  if (email === undefined || email === '') {
    const items = (await entitlements.list()).map(grantJson);
    const entities = (await ctx.entityGrants.list()).map(entityJson);
    return {
      body: { mode: entitlements.mode, items, entities, ent_max: ctx.entityGrants.max },
      audit: { detail: { count: items.length, entities: entities.length } },
    };
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
    entities: (await ctx.entityGrants.forEmail(u.email, u.roles)).map(entityJson),
    ent_max: ctx.entityGrants.max,
  };
  return { body, audit: { target: email, email } };
};

export const grantRoute: AdminHandler = async ({ ctx, body: read, admin }) => {
  const input = await read();
  if (input.entity !== undefined && input.service === undefined) {
    const { entity, permission, who } = entityTarget(input, true);
    const r = await ctx.entityGrants.grant(entity, permission!, who, admin.email);
    const body = { entity, permission, ...whoJson(who), granted: true, created: r.created };
    return { body, audit: { target: entityText(entity, who), email: who.email, detail: body } };
  }
  const { service, who } = target(ctx.config.services, input);
  const r = await ctx.entitlements.grant(service, who, admin.email);
  // `mode`: with open entitlements a service grant is recorded but decides nothing until `managed`.
  const body = { service, ...whoJson(who), granted: true, created: r.created, mode: ctx.entitlements.mode };
  return { body, audit: { target: whoText(service, who), email: who.email, detail: body } };
};

export const ungrantRoute: AdminHandler = async ({ ctx, query: q, admin }) => {
  const input: Record<string, unknown> = {};
  for (const k of ['service', 'entity', 'permission', 'email', 'role']) if (q.has(k)) input[k] = q.get(k);
  if (input.entity !== undefined && input.service === undefined) {
    const { entity, permission, who } = entityTarget(input, false);
    const r = await ctx.entityGrants.ungrant(entity, permission, who, admin.email);
    const body = {
      entity,
      permission: permission ?? null,
      ...whoJson(who),
      removed: r.removed > 0,
      cutoff: r.cutoff,
      subjects: r.subjects,
    };
    return { body, audit: { target: entityText(entity, who), email: who.email, detail: body } };
  }
  const { service, who } = target(ctx.config.services, input);
  const r = await ctx.entitlements.ungrant(service, who, admin.email);
  const body = {
    service,
    ...whoJson(who),
    removed: r.removed,
    cutoff: r.cutoff,
    subjects: r.subjects,
    mode: ctx.entitlements.mode,
  };
  return { body, audit: { target: whoText(service, who), email: who.email, detail: body } };
};
