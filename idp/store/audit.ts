import type { Pool } from '../../lib/db.ts';

export interface AuditEntry {
  issuedAt: string;
  jti: string;
  grantType: string;
  subject: string;
  email: string;
  clientId: string;
  scope: string;
}

export async function listAudit(
  pool: Pool,
  opts: { email?: string; limit?: number } = {},
): Promise<AuditEntry[]> {
  const { rows } = await pool.query<{
    issued_at: Date;
    jti: string;
    grant_type: string;
    subject: string;
    email: string;
    client_id: string;
    scope: string;
  }>(
    `SELECT issued_at, jti, grant_type, subject, email, client_id, scope FROM platform.issuance_audit
      WHERE ($1::text IS NULL OR email = lower($1)) ORDER BY id DESC LIMIT $2`,
    [opts.email ?? null, opts.limit ?? 100],
  );
  return rows.map((r) => ({
    issuedAt: r.issued_at.toISOString(),
    jti: r.jti,
    grantType: r.grant_type,
    subject: r.subject,
    email: r.email,
    clientId: r.client_id,
    scope: r.scope,
  }));
}
