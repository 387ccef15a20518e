import type { Pool } from '../../lib/db.ts';

/**
 * One row of the audit as the admin API shows it: an issued access token (`event` `issued`, from the issuance
 * audit) or an administrative action (`event` = the action, from the admin audit), newest first.
 */
export interface AuditItem {
  /** `issued:<n>` or `admin:<n>`: unique across both records. */
  id: string;
  at: string;
  event: string;
  /** issued: the token's user; admin: the administrator who acted. */
  email: string;
  subject: string;
  client_id: string | null;
  /** issued only. */
  grant_type: string | null;
  jti: string | null;
  scope: string | null;
  expires_at: string | null;
  /** admin only: what was acted on (a jti, an email, a sign-in id, …) and the answer given. */
  target: string | null;
  detail: Record<string, unknown> | null;
  request_id: string | null;
}

export interface AuditFilter {
  /** issued rows of this user; admin rows this administrator made or that targeted this email. */
  email?: string;
  clientId?: string;
  /** issued rows whose scope has `mcp:<service>` (admin rows are left out). */
  service?: string;
  since?: Date;
  until?: Date;
}

/** Where the previous page ended: the last row's time (µs since the epoch), record and id. */
export interface AuditPosition {
  us: string;
  kind: 'i' | 'a';
  id: string;
}

interface Row {
  kind: 'i' | 'a';
  id: string;
  us: string;
  at: Date;
  event: string;
  email: string;
  subject: string;
  client_id: string | null;
  grant_type: string | null;
  jti: string | null;
  scope: string | null;
  expires_at: Date | null;
  target: string | null;
  detail: Record<string, unknown> | null;
  request_id: string | null;
}

// Both records in one ordered stream. Each branch filters on its own indexes before the union; the position
// comparison makes paging stable however many rows arrive meanwhile (keyset, never OFFSET).
const QUERY = `
  SELECT * FROM (
    SELECT 'i' AS kind, id::text, (extract(epoch FROM issued_at) * 1000000)::bigint::text AS us, issued_at AS at,
           'issued' AS event, email, subject, client_id, grant_type, jti::text AS jti, scope, expires_at,
           NULL::text AS target, NULL::jsonb AS detail, NULL::text AS request_id
      FROM platform.issuance_audit
     WHERE ($1::text IS NULL OR email = $1)
       AND ($2::text IS NULL OR client_id = $2)
       AND ($3::text IS NULL OR (' ' || scope || ' ') LIKE '% mcp:' || $3 || ' %')
       AND ($4::timestamptz IS NULL OR issued_at >= $4)
       AND ($5::timestamptz IS NULL OR issued_at < $5)
    UNION ALL
    SELECT 'a', id::text, (extract(epoch FROM at) * 1000000)::bigint::text, at,
           action, actor_email, actor_sub, actor_client_id, NULL, NULL, NULL, NULL,
           target, detail, request_id
      FROM platform.admin_audit
     WHERE $3::text IS NULL
       AND ($1::text IS NULL OR actor_email = $1 OR lower(target) = $1)
       AND ($2::text IS NULL OR actor_client_id = $2)
       AND ($4::timestamptz IS NULL OR at >= $4)
       AND ($5::timestamptz IS NULL OR at < $5)
  ) u
  WHERE $6::bigint IS NULL OR (u.us::bigint, u.kind, u.id::bigint) < ($6::bigint, $7::text, $8::bigint)
  ORDER BY u.us::bigint DESC, u.kind DESC, u.id::bigint DESC
  LIMIT $9`;

/** Up to `limit` rows after `after` (newest first), and the position to continue from when there are more. */
export async function readAudit(
  pool: Pool,
  filter: AuditFilter,
  page: { limit: number; after?: AuditPosition },
): Promise<{ items: AuditItem[]; next: AuditPosition | undefined }> {
  const { rows } = await pool.query<Row>(QUERY, [
    filter.email?.trim().toLowerCase() ?? null,
    filter.clientId ?? null,
    filter.service ?? null,
    filter.since ?? null,
    filter.until ?? null,
    page.after?.us ?? null,
    page.after?.kind ?? null,
    page.after?.id ?? null,
    page.limit + 1,
  ]);
  const more = rows.length > page.limit;
  const kept = more ? rows.slice(0, page.limit) : rows;
  const last = kept[kept.length - 1];
  return {
    items: kept.map(toItem),
    next: more && last ? { us: last.us, kind: last.kind, id: last.id } : undefined,
  };
}

function toItem(r: Row): AuditItem {
  return {
    id: `${r.kind === 'i' ? 'issued' : 'admin'}:${r.id}`,
    at: r.at.toISOString(),
    event: r.event,
    email: r.email,
    subject: r.subject,
    client_id: r.client_id,
    grant_type: r.grant_type,
    jti: r.jti,
    scope: r.scope,
    expires_at: r.expires_at ? r.expires_at.toISOString() : null,
    target: r.target,
    detail: r.detail,
    request_id: r.request_id,
  };
}
