import type { Queryable } from './transaction.ts';

export interface AdminAuditEntry {
  actorEmail: string;
  actorSub: string;
  /** The client the admin's token was issued to; undefined for the console (web session). */
  actorClientId?: string;
  action: string;
  target?: string;
  /** The user the action concerns (lowercased when written), if any. */
  targetEmail?: string;
  detail?: Record<string, unknown>;
  requestId?: string;
}

export interface AdminAuditRow
  extends Required<Omit<AdminAuditEntry, 'actorClientId' | 'target' | 'targetEmail' | 'requestId'>> {
  id: string;
  at: string;
  actorClientId: string | null;
  target: string | null;
  requestId: string | null;
}

/** The append-only record of administrative actions (table platform.admin_audit, migration 003). */
export interface AdminAuditStore {
  record(entry: AdminAuditEntry): Promise<void>;
  list(opts?: { actorEmail?: string; limit?: number }): Promise<AdminAuditRow[]>;
}

export function createAdminAuditStore(pool: Queryable): AdminAuditStore {
  return {
    async record(e) {
      await pool.query(
        `INSERT INTO platform.admin_audit
           (actor_email, actor_sub, actor_client_id, action, target, target_email, detail, request_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [
          e.actorEmail,
          e.actorSub,
          e.actorClientId ?? null,
          e.action,
          e.target ?? null,
          e.targetEmail?.trim().toLowerCase() ?? null,
          JSON.stringify(e.detail ?? {}),
          e.requestId ?? null,
        ],
      );
    },
    async list(opts = {}) {
      const { rows } = await pool.query<{
        id: string;
        at: Date;
        actor_email: string;
        actor_sub: string;
        actor_client_id: string | null;
        action: string;
        target: string | null;
        detail: Record<string, unknown>;
        request_id: string | null;
      }>(
        `SELECT id::text, at, actor_email, actor_sub, actor_client_id, action, target, detail, request_id
           FROM platform.admin_audit WHERE ($1::text IS NULL OR actor_email = lower($1))
          ORDER BY id DESC LIMIT $2`,
        [opts.actorEmail ?? null, opts.limit ?? 100],
      );
      return rows.map((r) => ({
        id: r.id,
        at: r.at.toISOString(),
        actorEmail: r.actor_email,
        actorSub: r.actor_sub,
        actorClientId: r.actor_client_id,
        action: r.action,
        target: r.target,
        detail: r.detail,
        requestId: r.request_id,
      }));
    },
  };
}
