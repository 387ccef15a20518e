import type { Pool } from '../../lib/db.ts';
import type { EntitlementUser, Grantee } from '../entitlements/entitlements.ts';
import type { RoleSource } from '../entitlements/roles.ts';
import type { RevocationService } from '../revocation.ts';
import type { Queryable } from '../store/transaction.ts';
import { ENTITY_PERMISSIONS, type EntityPermission } from './permission.ts';

// Entity grants (docs/idp.md § Entity grants): `read` or `write` on an entity key, granted to an email or to a
// role. Every issuance (code, device code, refresh) reads the user's grants in its own transaction, FOR SHARE,
// and puts them in the access token's `ent` claim; an ungrant cuts the live tokens of those who lose a
// permission, so their clients refresh and get a token without it.

export { ENTITY_PERMISSIONS, type EntityPermission } from './permission.ts';
/** An entity key: `kind:id` and the like; no spaces or control characters, so it is safe in every listing. */
export const ENTITY_KEY = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$/;

/** The `ent` claim: entity → its permissions, sorted. */
export type EntClaim = Record<string, EntityPermission[]>;

/**
 * What an access token carries: `ent`, or, when the user holds grants on more than PLATFORM_ENT_MAX entities,
 * no `ent` and `ent_overflow: true` (no grant is silently dropped: a service that enforces entity grants
 * refuses every entity to such a token, so the administrator sees the refusal and narrows the grants).
 */
export type EntClaims = { ent?: EntClaim; ent_overflow?: true };

export interface EntityGrantRecord {
  entity: string;
  permission: EntityPermission;
  email: string | null;
  role: string | null;
  grantedBy: string;
  grantedAt: string;
}

export interface EntityUngrantResult {
  removed: number;
  cutoff: number | null;
  subjects: string[];
}

export interface EntityGrants {
  readonly max: number;
  /** The token claims for this user, read (FOR SHARE) in the issuance's transaction `tx`. */
  claims(user: EntitlementUser, tx: Queryable): Promise<EntClaims>;
  grant(
    entity: string,
    permission: EntityPermission,
    to: Grantee,
    actor: string,
  ): Promise<{ created: boolean }>;
  /** Without `permission`: both. */
  ungrant(
    entity: string,
    permission: EntityPermission | undefined,
    from: Grantee,
    actor: string,
  ): Promise<EntityUngrantResult>;
  list(): Promise<EntityGrantRecord[]>;
  forEmail(email: string, roles: readonly string[]): Promise<EntityGrantRecord[]>;
}

/** Access tokens live an hour: anyone who may hold one was issued it within that window. */
const ACCESS_TOKEN_WINDOW_SECONDS = 3600;

interface Row {
  entity: string;
  permission: EntityPermission;
  email: string | null;
  role: string | null;
  granted_by: string;
  granted_at: Date;
}

const toRecord = (r: Row): EntityGrantRecord => ({
  entity: r.entity,
  permission: r.permission,
  email: r.email,
  role: r.role,
  grantedBy: r.granted_by,
  grantedAt: r.granted_at.toISOString(),
});

/** The claim from grant rows: at most `max` entities, else the overflow marker. */
export function entClaims(
  rows: readonly { entity: string; permission: EntityPermission }[],
  max: number,
): EntClaims {
  const by = new Map<string, Set<EntityPermission>>();
  for (const r of rows) by.set(r.entity, (by.get(r.entity) ?? new Set()).add(r.permission));
  if (by.size === 0) return {};
  if (by.size > max) return { ent_overflow: true };
  const ent: EntClaim = {};
  for (const k of [...by.keys()].sort()) ent[k] = ENTITY_PERMISSIONS.filter((p) => by.get(k)!.has(p));
  return { ent };
}

export function createEntityGrants(opts: {
  pool: Pool;
  max: number;
  roles: RoleSource;
  revocation: Pick<RevocationService, 'cutOff'>;
}): EntityGrants {
  const { pool, max, roles, revocation } = opts;

  async function permissions(user: EntitlementUser, db: Queryable, lock: boolean) {
    const { rows } = await db.query<{ entity: string; permission: EntityPermission }>({
      name: lock ? 'entity_grants_locked' : 'entity_grants',
      // Locked in id order, the order an ungrant's DELETE takes them in (see ungrant).
      text: `SELECT entity, permission FROM platform.entity_grants WHERE email = $1 OR role = ANY($2::text[])${lock ? ' ORDER BY id FOR SHARE' : ''}`,
      values: [user.email.toLowerCase(), await roles.roles(user.userId, db)],
    });
    return rows;
  }

  return {
    max,
    async claims(user, tx) {
      return entClaims(await permissions(user, tx, true), max);
    },

    async grant(entity, permission, to, actor) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const { rowCount } = await client.query(
          `INSERT INTO platform.entity_grants (entity, permission, email, role, granted_by) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT DO NOTHING`,
          [entity, permission, to.email ?? null, to.role ?? null, actor],
        );
        await client.query(
          `INSERT INTO platform.entity_grant_changes (action, entity, permission, email, role, actor)
           VALUES ('grant', $1, $2, $3, $4, $5)`,
          [entity, permission, to.email ?? null, to.role ?? null, actor],
        );
        await client.query('COMMIT');
        return { created: rowCount === 1 };
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },

    async ungrant(entity, permission, from, actor) {
      // Committed on its own before the search: the DELETE waits for every issuance holding the rows (claims()
      // reads them FOR SHARE), so the search and the cut-off (the database clock, read after) see them all. The
      // rows are locked in id order, as every issuance locks them: in its index's order (read before write) the
      // DELETE could hold one row while an issuance, reading in the heap's order, held the other, and Postgres
      // would abort one of the two (test/idp/rotation-entity-grants.test.ts forces it).
      const { rows: deleted } = await pool.query<{ permission: EntityPermission }>(
        `DELETE FROM platform.entity_grants WHERE id IN (
           SELECT id FROM platform.entity_grants
            WHERE entity = $1 AND ($2::text IS NULL OR permission = $2) AND ${from.email !== undefined ? 'email' : 'role'} = $3
            ORDER BY id FOR UPDATE)
         RETURNING permission`,
        [entity, permission ?? null, from.email ?? from.role],
      );
      // Only what was removed is lost: an ungrant that removed nothing (or only `read`) cuts no one for it.
      const lost = ENTITY_PERMISSIONS.filter((p) => deleted.some((d) => d.permission === p));
      // Those who may hold a live token (narrowed to the email for an email grant, to the role's members for a
      // role grant) and no longer hold every withdrawn permission: their tokens are cut. Others keep theirs.
      const { rows } =
        lost.length === 0
          ? { rows: [] }
          : await pool.query<{ user_id: string; subject: string; email: string }>(
              `SELECT DISTINCT user_id, subject, email FROM platform.issuance_audit
                WHERE issued_at > now() - make_interval(secs => $1) AND ($2::text IS NULL OR email = $2)`,
              [ACCESS_TOKEN_WINDOW_SECONDS, from.email ?? null],
            );
      const losing = new Map<string, string[]>(); // email → subjects
      for (const r of rows) {
        const user = { userId: r.user_id, email: r.email };
        if (from.role !== undefined && !(await roles.roles(r.user_id)).includes(from.role)) continue;
        const now = (await permissions(user, pool, false)).filter((g) => g.entity === entity);
        if (lost.every((p) => now.some((g) => g.permission === p))) continue;
        const subs = losing.get(r.email) ?? [];
        if (!subs.includes(r.subject)) subs.push(r.subject);
        losing.set(r.email, subs);
      }
      let cutoff: number | null = null;
      for (const [email, subs] of losing) {
        ({ cutoff } = await revocation.cutOff({ email, subjects: subs, by: `entity-ungrant:${actor}` }));
      }
      const subjects = [...losing.values()].flat().sort();
      await pool.query(
        `INSERT INTO platform.entity_grant_changes (action, entity, permission, email, role, actor, subjects)
         VALUES ('ungrant', $1, $2, $3, $4, $5, $6)`,
        [entity, permission ?? null, from.email ?? null, from.role ?? null, actor, subjects],
      );
      return { removed: deleted.length, cutoff, subjects };
    },

    async list() {
      const { rows } = await pool.query<Row>(
        `SELECT entity, permission, email, role, granted_by, granted_at FROM platform.entity_grants
          ORDER BY entity, permission, email NULLS LAST, role`,
      );
      return rows.map(toRecord);
    },

    async forEmail(email, roleNames) {
      const { rows } = await pool.query<Row>(
        `SELECT entity, permission, email, role, granted_by, granted_at FROM platform.entity_grants
          WHERE email = $1 OR role = ANY($2::text[]) ORDER BY entity, permission, email NULLS LAST, role`,
        [email.toLowerCase(), roleNames],
      );
      return rows.map(toRecord);
    },
  };
}
