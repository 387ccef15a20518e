import type { Pool } from '../../lib/db.ts';

/**
 * One row of the audit as the admin API shows it: an issued access token (`event` `issued`, from the issuance
 * audit), a refused grant or consent (`event` `refused`, from the refusal audit) or an administrative action
 * (`event` = the action, from the admin audit), newest first.
 */
export interface AuditItem {
  /** `issued:<n>`, `refused:<n>` or `admin:<n>`: unique across the three records. */
  id: string;
  at: string;
  event: string;
  /** issued/refused: the token's user (refused: null when the refused grant names no known user); admin: the administrator who acted. */
  email: string | null;
  subject: string | null;
  client_id: string | null;
  /** issued, and refused at the token endpoint. */
  grant_type: string | null;
  jti: string | null;
  scope: string | null;
  expires_at: string | null;
  /** admin: what was acted on (a jti, an email, a sign-in id, …); refused: the OAuth error answered. */
  target: string | null;
  /**
   * admin: the answer given; refused: {"source", "reason"}; issued for an assertion: {"assertion_issuer"}; issued by
   * a token exchange: {"subject_jti", "connection"?} (the token it was exchanged from; the connection, for the
   * gateway's exchange, whose upstream token is never recorded); a connection's own row (connect, refresh,
   * disconnect): {"connection"}.
   */
  detail: Record<string, unknown> | null;
  request_id: string | null;
}

export interface AuditFilter {
  /** issued and refused rows of this user; admin rows this administrator made or that targeted this email. */
  email?: string;
  clientId?: string;
  /** issued rows whose scope has `mcp:<service>` (admin and refused rows are left out). */
  service?: string;
  since?: Date;
  until?: Date;
}

/** The three records, in the feed's order for rows of the same microsecond (descending: r, i, a). */
export type AuditKind = 'r' | 'i' | 'a';

/** Where the previous page ended: the last row's time (µs since the epoch), record and id. */
export interface AuditPosition {
  us: string;
  kind: AuditKind;
  id: string;
}

interface Row {
  kind: AuditKind;
  id: string;
  us: string;
  at: Date;
  event: string;
  email: string | null;
  subject: string | null;
  client_id: string | null;
  grant_type: string | null;
  jti: string | null;
  scope: string | null;
  expires_at: Date | null;
  target: string | null;
  detail: Record<string, unknown> | null;
  request_id: string | null;
}

// Each record is read on its own, newest first, through an index that ends in (time, id) (migration 020), up to
// one page past the cursor; the three short lists are then merged. With a cursor, a record's rows come after the
// position when (time, id) < (position's time, bound), where bound is the position's id for the position's own
// record, above every id for a record that sorts before it at the same microsecond, and 0 for one after it.
// Parameters: $1 email, $2 client_id, $3 service, $4 since, $5 until, $6 position time (µs), $7..$9 the bound
// for r, i, a, $10 the limit. A NULL parameter's condition folds away when the statement is planned with its
// values (node-postgres sends unnamed statements: a custom plan each time), leaving only indexable conditions.
export const AUDIT_QUERY = `
  WITH pos AS (SELECT 'epoch'::timestamptz + $6::bigint * interval '1 microsecond' AS at)
  SELECT u.*, (extract(epoch FROM u.at) * 1000000)::bigint::text AS us FROM (
    (SELECT 'r'::text AS kind, id, at, 'refused' AS event, email, subject, client_id, grant_type,
            NULL::text AS jti, NULL::text AS scope, NULL::timestamptz AS expires_at, error AS target,
            jsonb_build_object('source', source, 'reason', reason) AS detail, request_id
       FROM platform.refusal_audit
      WHERE $3::text IS NULL
        AND ($1::text IS NULL OR email = $1)
        AND ($2::text IS NULL OR client_id = $2)
        AND ($4::timestamptz IS NULL OR at >= $4)
        AND ($5::timestamptz IS NULL OR at < $5)
        AND ($6::bigint IS NULL OR (at, id) < ((SELECT at FROM pos), $7::bigint))
      ORDER BY at DESC, id DESC LIMIT $10)
    UNION ALL
    (SELECT 'i', id, issued_at, 'issued', email, subject, client_id, grant_type, jti::text, scope, expires_at,
            NULL, CASE WHEN assertion_issuer IS NOT NULL OR subject_jti IS NOT NULL OR connection IS NOT NULL
                       THEN jsonb_strip_nulls(jsonb_build_object('assertion_issuer', assertion_issuer,
                              'subject_jti', subject_jti, 'connection', connection)) END, NULL
       FROM platform.issuance_audit
      WHERE ($1::text IS NULL OR email = $1)
        AND ($2::text IS NULL OR client_id = $2)
        AND ($3::text IS NULL OR string_to_array(scope, ' ') @> ARRAY['mcp:' || $3])
        AND ($4::timestamptz IS NULL OR issued_at >= $4)
        AND ($5::timestamptz IS NULL OR issued_at < $5)
        AND ($6::bigint IS NULL OR (issued_at, id) < ((SELECT at FROM pos), $8::bigint))
      ORDER BY issued_at DESC, id DESC LIMIT $10)
    UNION ALL
    (SELECT 'a', id, at, action, actor_email, actor_sub, actor_client_id, NULL, NULL, NULL, NULL,
            target, detail, request_id
       FROM platform.admin_audit
      WHERE $3::text IS NULL
        AND ($1::text IS NULL OR actor_email = $1 OR target_email = $1)
        AND ($2::text IS NULL OR actor_client_id = $2)
        AND ($4::timestamptz IS NULL OR at >= $4)
        AND ($5::timestamptz IS NULL OR at < $5)
        AND ($6::bigint IS NULL OR (at, id) < ((SELECT at FROM pos), $9::bigint))
      ORDER BY at DESC, id DESC LIMIT $10)
  ) u
  ORDER BY at DESC, kind DESC, id DESC
  LIMIT $10`;

const ORDER: Record<AuditKind, number> = { a: 0, i: 1, r: 2 };
const ABOVE_ALL = '9223372036854775807';

/** The bound of each record's (time, id) comparison for a position (see AUDIT_QUERY). */
function bound(kind: AuditKind, p: AuditPosition | undefined): string | null {
  if (!p) return null;
  if (kind === p.kind) return p.id;
  return ORDER[kind] < ORDER[p.kind] ? ABOVE_ALL : '0';
}

/** The parameters of AUDIT_QUERY (exported for the query-plan test). */
export function auditParams(filter: AuditFilter, page: { limit: number; after?: AuditPosition }): unknown[] {
  const after = page.after;
  return [
    filter.email?.trim().toLowerCase() ?? null,
    filter.clientId ?? null,
    filter.service ?? null,
    filter.since ?? null,
    filter.until ?? null,
    after?.us ?? null,
    bound('r', after),
    bound('i', after),
    bound('a', after),
    page.limit + 1,
  ];
}

/** Up to `limit` rows after `after` (newest first), and the position to continue from when there are more. */
export async function readAudit(
  pool: Pool,
  filter: AuditFilter,
  page: { limit: number; after?: AuditPosition },
): Promise<{ items: AuditItem[]; next: AuditPosition | undefined }> {
  const { rows } = await pool.query<Row>(AUDIT_QUERY, auditParams(filter, page));
  const more = rows.length > page.limit;
  const kept = more ? rows.slice(0, page.limit) : rows;
  const last = kept[kept.length - 1];
  return {
    items: kept.map(toItem),
    next: more && last ? { us: last.us, kind: last.kind, id: last.id } : undefined,
  };
}

function toItem(r: Row): AuditItem {
  const kindName = r.kind === 'i' ? 'issued' : r.kind === 'r' ? 'refused' : 'admin';
  return {
    id: `${kindName}:${r.id}`,
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
