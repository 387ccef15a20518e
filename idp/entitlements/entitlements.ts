import { ident, type Pool } from '../../lib/db.ts';
import type { IdpConfig } from '../config.ts';
import type { RevocationService } from '../revocation.ts';
import { entitledScope } from '../scopes.ts';
import type { Queryable } from '../store/transaction.ts';
import type { RoleSource } from './roles.ts';

// Who may get a token for which service. `open` (the default): every user with a `users` row, every service.
// `managed`: a service only through a grant to the user's email or to one of the user's roles. A service the
// user is not entitled to is left out of the granted scope at authorize, at the code exchange and at every
// refresh; an ungrant cuts the live access tokens of those who lose the service (subject and email cut-offs),
// so their clients refresh and get the narrowed scope.

export type Grantee = { email: string; role?: undefined } | { role: string; email?: undefined };

export interface GrantRecord {
  service: string;
  email: string | null;
  role: string | null;
  grantedBy: string;
  grantedAt: string;
}

export interface UserEntitlements {
  email: string;
  /** The web application's user ids with this email (usually one). */
  userIds: string[];
  roles: string[];
  services: string[];
  grants: GrantRecord[];
}

export interface UngrantResult {
  removed: boolean;
  /** The cut-off written (unix seconds), null when nobody lost the service. */
  cutoff: number | null;
  /** Subjects whose live tokens were cut off (they lost the service). */
  subjects: string[];
}

export interface EntitlementUser {
  userId: string;
  email: string;
}

export interface Entitlements {
  readonly mode: IdpConfig['entitlements'];
  /**
   * The services the user may get `mcp:<service>` for. With `tx` (an issuance's transaction) the grant rows
   * read are locked FOR SHARE until it commits: an ungrant's DELETE waits for the issuance, whose audit row
   * it then finds (docs/idp.md § Revocation); an issuance after the DELETE no longer sees the grant.
   */
  services(user: EntitlementUser, tx?: Queryable): Promise<ReadonlySet<string>>;
  grant(service: string, to: Grantee, actor: string): Promise<{ created: boolean }>;
  ungrant(service: string, from: Grantee, actor: string): Promise<UngrantResult>;
  list(): Promise<GrantRecord[]>;
  /** The user and scope a refresh token was issued for (managed mode narrows the refreshed scope by it). */
  refreshHolder(tokenHash: string): Promise<(EntitlementUser & { scope: string }) | undefined>;
  forEmail(email: string): Promise<UserEntitlements>;
}

/** Cuts a user's live tokens: the subject cut-off and, where the revocation service has it, the email's. */
/**
 * The scope an approval (authorization code, device code) is exchanged for: in managed mode without the
 * `mcp:` services the user is not entitled to now (a grant withdrawn since the approval is left out); in open
 * mode the approved scope. The grant rows are read in the issuance's transaction (`services` with `tx`).
 */
export async function scopeAtIssuance(
  entitlements: Entitlements,
  approved: string,
  user: EntitlementUser,
  tx: Queryable,
): Promise<string> {
  if (entitlements.mode !== 'managed') return approved;
  return entitledScope(approved, await entitlements.services(user, tx));
}

export type CutOff = (subject: string, email: string, cutoff: number) => Promise<void>;

export interface EntitlementsOptions {
  pool: Pool;
  config: Pick<IdpConfig, 'entitlements' | 'services' | 'authjs'>;
  roles: RoleSource;
  /** The SQL type of the users table's id, when the table exists (the refresh path reads the current email). */
  usersIdType?: string | undefined;
  /** The one revocation service: an ungrant writes the cut-offs through it (recorded, then published). */
  revocation: Pick<RevocationService, 'cutOff'>;
}

/** Access tokens live an hour: anyone who may hold one was issued it within that window. */
const ACCESS_TOKEN_WINDOW_SECONDS = 3600;

interface GrantRow {
  service: string;
  email: string | null;
  role: string | null;
  granted_by: string;
  granted_at: Date;
}

const toRecord = (r: GrantRow): GrantRecord => ({
  service: r.service,
  email: r.email,
  role: r.role,
  grantedBy: r.granted_by,
  grantedAt: r.granted_at.toISOString(),
});

export function createEntitlements(opts: EntitlementsOptions): Entitlements {
  const { pool, config, roles, revocation } = opts;
  const all: ReadonlySet<string> = new Set(config.services);
  const usersTable = ident(config.authjs.usersTable);
  // Like the refresh grant itself, entitlements follow the user's current email (a renamed user's grants).
  const currentEmail = opts.usersIdType
    ? `COALESCE((SELECT lower(trim(u.email)) FROM ${usersTable} u WHERE u.id = r.user_id::${opts.usersIdType}), r.email)`
    : 'r.email';

  async function granted(email: string, roleNames: readonly string[], tx?: Queryable): Promise<Set<string>> {
    const { rows } = await (tx ?? pool).query<{ service: string }>({
      name: tx ? 'entitled_services_locked' : 'entitled_services',
      text: `SELECT service FROM platform.entitlement_grants WHERE email = $1 OR role = ANY($2::text[])${tx ? ' FOR SHARE' : ''}`,
      values: [email.toLowerCase(), roleNames],
    });
    return new Set(rows.map((r) => r.service).filter((s) => all.has(s)));
  }

  async function services(user: EntitlementUser, tx?: Queryable): Promise<ReadonlySet<string>> {
    if (config.entitlements === 'open') return all;
    return granted(user.email, await roles.roles(user.userId, tx), tx);
  }

  return {
    mode: config.entitlements,
    services,

    async grant(service, to, actor) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const { rowCount } = await client.query(
          `INSERT INTO platform.entitlement_grants (service, email, role, granted_by) VALUES ($1, $2, $3, $4)
           ON CONFLICT DO NOTHING`,
          [service, to.email ?? null, to.role ?? null, actor],
        );
        await client.query(
          `INSERT INTO platform.entitlement_changes (action, service, email, role, actor) VALUES ('grant', $1, $2, $3, $4)`,
          [service, to.email ?? null, to.role ?? null, actor],
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

    async ungrant(service, from, actor) {
      // Committed on its own before the search below: the DELETE waits for every issuance holding the grant
      // (services() with a transaction), so the search and the cut-off (clock read after) see them all.
      const { rowCount } = await pool.query(
        `DELETE FROM platform.entitlement_grants WHERE service = $1 AND ${from.email !== undefined ? 'email' : 'role'} = $2`,
        [service, from.email ?? from.role],
      );
      let cutoff: number | undefined;
      // Everyone who may hold a live token for the service (narrowed to the email for an email grant), then
      // those of them who are no longer entitled: their tokens are cut. Others keep theirs.
      const { rows } = await pool.query<{ user_id: string; subject: string; email: string }>(
        `SELECT DISTINCT user_id, subject, email FROM platform.issuance_audit
          WHERE issued_at > now() - make_interval(secs => $1)
            AND $2 = ANY(string_to_array(scope, ' '))
            AND ($3::text IS NULL OR email = $3)`,
        [ACCESS_TOKEN_WINDOW_SECONDS, `mcp:${service}`, from.email ?? null],
      );
      const losing = new Map<string, string[]>(); // email → subjects
      if (config.entitlements === 'managed') {
        for (const r of rows) {
          const still = await services({ userId: r.user_id, email: r.email });
          if (still.has(service)) continue;
          const subs = losing.get(r.email) ?? [];
          if (!subs.includes(r.subject)) subs.push(r.subject);
          losing.set(r.email, subs);
        }
      }
      for (const [email, subs] of losing) {
        ({ cutoff } = await revocation.cutOff({ email, subjects: subs, by: `ungrant:${actor}` }));
      }
      const subjects = [...losing.values()].flat().sort();
      await pool.query(
        `INSERT INTO platform.entitlement_changes (action, service, email, role, actor, subjects)
         VALUES ('ungrant', $1, $2, $3, $4, $5)`,
        [service, from.email ?? null, from.role ?? null, actor, subjects],
      );
      return { removed: rowCount === 1, cutoff: cutoff ?? null, subjects };
    },

    async refreshHolder(tokenHash) {
      const { rows } = await pool.query<{ user_id: string; email: string; scope: string }>({
        name: 'refresh_holder',
        text: `SELECT r.user_id, ${currentEmail} AS email, r.scope FROM platform.refresh_tokens r WHERE r.token_hash = $1`,
        values: [tokenHash],
      });
      const r = rows[0];
      return r && { userId: r.user_id, email: r.email, scope: r.scope };
    },

    async list() {
      const { rows } = await pool.query<GrantRow>(
        `SELECT service, email, role, granted_by, granted_at FROM platform.entitlement_grants
          ORDER BY service, email NULLS LAST, role`,
      );
      return rows.map(toRecord);
    },

    async forEmail(email) {
      const e = email.toLowerCase();
      const users = await pool
        .query<{ id: string }>(
          `SELECT id::text AS id FROM ${usersTable} WHERE lower(trim(email)) = $1 ORDER BY id`,
          [e],
        )
        .then((r) => r.rows.map((u) => u.id))
        .catch(() => [] as string[]);
      const roleNames = [...new Set((await Promise.all(users.map((u) => roles.roles(u)))).flat())].sort();
      const { rows } = await pool.query<GrantRow>(
        `SELECT service, email, role, granted_by, granted_at FROM platform.entitlement_grants
          WHERE email = $1 OR role = ANY($2::text[]) ORDER BY service, email NULLS LAST, role`,
        [e, roleNames],
      );
      const effective =
        config.entitlements === 'open'
          ? users.length > 0
            ? [...all]
            : []
          : config.services.filter((s) => rows.some((r) => r.service === s));
      return { email: e, userIds: users, roles: roleNames, services: effective, grants: rows.map(toRecord) };
    },
  };
}
