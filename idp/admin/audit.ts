import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { parseIsoTime } from '../../lib/iso-time.ts';
import { isServiceName } from '../../lib/service-name.ts';
import { InvalidRequestError } from '../errors.ts';
import {
  type AuditFilter,
  type AuditItem,
  type AuditKind,
  type AuditPosition,
  readAudit,
} from '../store/audit.ts';
import type { AdminHandler, AdminRequest } from './route-table.ts';

const PAGE_MAX = 500;
const PAGE_DEFAULT = 50;
/** Rows read per query while an export streams. */
const EXPORT_BATCH = 1000;
const FILTERS = ['email', 'client_id', 'service', 'since', 'until'] as const;

/** GET /admin/api/audit → {"items", "next_cursor"}: one page, newest first. */
export const auditPage: AdminHandler = async ({ ctx, query: given }) => {
  const q = query(given, ['limit', 'cursor']);
  const filter = auditFilter(q);
  const limit = count(q.get('limit'), PAGE_MAX) ?? PAGE_DEFAULT;
  const cursor = q.get('cursor');
  const page = await readAudit(ctx.pool, filter, {
    limit,
    after: cursor === undefined ? undefined : decodeCursor(cursor),
  });
  return {
    body: { items: page.items, next_cursor: page.next ? encodeCursor(page.next) : null },
    audit: { detail: { filter: describe(q), returned: page.items.length } },
  };
};

/** GET /admin/api/audit.jsonl and .csv: every matching row (or `limit`), streamed as it is read. */
export function auditExport(format: 'jsonl' | 'csv'): AdminHandler {
  return async ({ ctx, x, query: given }: AdminRequest) => {
    const q = query(given, ['limit']);
    const filter = auditFilter(q);
    const limit = count(q.get('limit'), Number.MAX_SAFE_INTEGER);
    const res = x.res;
    res.writeHead(200, {
      'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
      'content-disposition': `attachment; filename="audit.${format}"`,
      'cache-control': 'no-store',
    });
    if (format === 'csv') await write(res, `${CSV_COLUMNS.join(',')}\r\n`);
    let written = 0;
    let after: AuditPosition | undefined;
    do {
      const want = limit === undefined ? EXPORT_BATCH : Math.min(EXPORT_BATCH, limit - written);
      const page = await readAudit(ctx.pool, filter, { limit: want, after });
      const text = page.items.map((i) => (format === 'csv' ? csvLine(i) : `${JSON.stringify(i)}\n`)).join('');
      if (text && !(await write(res, text))) return { sent: true, audit: { detail: exportNote(q, written) } };
      written += page.items.length;
      after = page.next;
    } while (after && (limit === undefined || written < limit));
    res.end();
    return { sent: true, audit: { detail: exportNote(q, written, format) } };
  };
}

function exportNote(q: Map<string, string>, rows: number, format?: string): Record<string, unknown> {
  return { filter: describe(q), exported: rows, ...(format ? { format } : { interrupted: true }) };
}

/** Writes with backpressure; false when the client went away. */
async function write(res: ServerResponse, chunk: string): Promise<boolean> {
  if (res.destroyed) return false;
  if (!res.write(chunk)) {
    await Promise.race([once(res, 'drain'), once(res, 'close')]);
  }
  return !res.destroyed;
}

/**
 * The query parameters, each at most once, none unknown (a misspelt filter must not silently widen an export).
 */
function query(params: URLSearchParams, extra: readonly string[]): Map<string, string> {
  const allowed = new Set<string>([...FILTERS, ...extra]);
  const q = new Map<string, string>();
  for (const [k, v] of params) {
    if (!allowed.has(k))
      throw new InvalidRequestError(`unknown parameter ${k}; known: ${[...allowed].join(', ')}`);
    if (q.has(k)) throw new InvalidRequestError(`parameter ${k} is repeated`);
    if (v !== '') q.set(k, v);
  }
  return q;
}

function auditFilter(q: Map<string, string>): AuditFilter {
  const service = q.get('service');
  if (service !== undefined && !isServiceName(service))
    throw new InvalidRequestError(`service "${service}" is not a service name`);
  const email = q.get('email');
  if (email !== undefined && email.length > 320) throw new InvalidRequestError('email is too long');
  const clientId = q.get('client_id');
  if (clientId !== undefined && clientId.length > 2048)
    throw new InvalidRequestError('client_id is too long');
  const since = time(q, 'since');
  const until = time(q, 'until');
  if (since && until && since >= until) throw new InvalidRequestError('since must be before until');
  return { email, clientId, service, since, until };
}

function time(q: Map<string, string>, name: string): Date | undefined {
  const v = q.get(name);
  if (v === undefined) return undefined;
  const t = parseIsoTime(v);
  if (!t) throw new InvalidRequestError(`${name} must be an ISO 8601 date or time, got "${v}"`);
  return t;
}

function count(v: string | undefined, max: number): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d{1,16}$/.test(v) || Number(v) < 1 || Number(v) > max)
    throw new InvalidRequestError(`limit must be a whole number from 1 to ${max}`);
  return Number(v);
}

function describe(q: Map<string, string>): Record<string, string> {
  return Object.fromEntries([...q].filter(([k]) => (FILTERS as readonly string[]).includes(k)));
}

const encodeCursor = (p: AuditPosition) => Buffer.from(`${p.us}.${p.kind}.${p.id}`).toString('base64url');

function decodeCursor(cursor: string): AuditPosition {
  const m = /^(\d{1,18})\.([iar])\.(\d{1,18})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m || cursor.length > 100) throw new InvalidRequestError('cursor is not one this API gave out');
  return { us: m[1]!, kind: m[2] as AuditKind, id: m[3]! };
}

const CSV_COLUMNS = [
  'id',
  'at',
  'event',
  'email',
  'subject',
  'client_id',
  'grant_type',
  'jti',
  'scope',
  'expires_at',
  'target',
  'detail',
  'request_id',
] as const;

function csvLine(item: AuditItem): string {
  return `${CSV_COLUMNS.map((c) => csvCell(c === 'detail' && item.detail ? JSON.stringify(item.detail) : item[c])).join(',')}\r\n`;
}

/**
 * RFC 4180 quoting, and a leading `'` on a cell a spreadsheet would run as a formula (=, +, -, @, tab, CR):
 * emails and client names are chosen by users, and an export is opened by an administrator.
 */
function csvCell(v: unknown): string {
  if (v === null || v === undefined) return '';
  let s = String(v);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

const HOURS_MAX = 24 * 14;

/**
 * GET /admin/api/audit/per-hour?hours=N → {"hours": [{"hour", "issued", "refused"}]}: issuances and refusals in
 * each of the last N whole hours (the current, partial, hour last; default 48, at most two weeks).
 */
export const auditPerHourRoute: AdminHandler = async ({ ctx, query: given }) => {
  for (const k of given.keys())
    if (k !== 'hours') throw new InvalidRequestError(`unknown parameter ${k}; known: hours`);
  const raw = given.get('hours');
  const hours = raw === null || raw === '' ? 48 : Number(raw);
  if (!/^\d{1,4}$/.test(raw ?? '48') || hours < 1 || hours > HOURS_MAX)
    throw new InvalidRequestError(`hours must be a whole number from 1 to ${HOURS_MAX}`);
  const rows = await ctx.refusals.perHour(hours);
  return {
    body: { hours: rows.map((r) => ({ hour: r.hour.toISOString(), issued: r.issued, refused: r.refused })) },
    audit: { detail: { hours } },
  };
};
