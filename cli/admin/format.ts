import { parseIsoTime } from '../../lib/iso-time.ts';
import { CliError } from '../client/errors.ts';

/** Rows as aligned columns under a header; a missing value shows as `-`. */
export function table(
  columns: ReadonlyArray<[header: string, key: string]>,
  rows: ReadonlyArray<object>,
): string {
  const cells = rows.map((r) => columns.map(([, key]) => cell((r as Record<string, unknown>)[key])));
  const widths = columns.map(([header], i) => Math.max(header.length, ...cells.map((c) => c[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => (i === values.length - 1 ? v : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns.map(([h]) => h)), ...cells.map(line)].join('\n');
}

function cell(v: unknown): string {
  if (v === undefined || v === null || v === '') return '-';
  if (Array.isArray(v)) return v.length ? v.join(' ') : '-';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/**
 * A time for `--since` / `--until`: an ISO 8601 date or date-time, or a span back from now (`30m`, `2h`, `7d`).
 * Anything else is a usage error naming the option.
 */
export function parseTime(option: string, value: string, now = Date.now()): string {
  const span = /^(\d+)([smhd])$/.exec(value.trim());
  if (span) {
    const unit = { s: 1, m: 60, h: 3600, d: 86_400 }[span[2] as 's' | 'm' | 'h' | 'd'];
    return new Date(now - Number(span[1]) * unit * 1000).toISOString();
  }
  const t = parseIsoTime(value.trim());
  if (!t) {
    throw new CliError(
      'USAGE',
      `${option} must be an ISO 8601 time (2026-11-23, 2026-11-23T14:00:00Z) or a span back from now (30m, 2h, 7d), got "${value}"`,
      { exitCode: 2 },
    );
  }
  return t.toISOString();
}

/** A whole number within bounds for an option, else a usage error naming it. */
export function parseCount(option: string, value: string, max: number): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n < 1 || n > max) {
    throw new CliError('USAGE', `${option} must be a whole number from 1 to ${max}, got "${value}"`, {
      exitCode: 2,
    });
  }
  return n;
}

/** One of a fixed set of words for an option, else a usage error listing them. */
export function parseChoice<T extends string>(option: string, value: string, choices: readonly T[]): T {
  if ((choices as readonly string[]).includes(value)) return value as T;
  throw new CliError('USAGE', `${option} must be one of ${choices.join(', ')}, got "${value}"`, {
    exitCode: 2,
  });
}

/** A revocation made while the IdP's Redis is unreachable (the answer's `published: false`). */
export const NOT_PUBLISHED =
  "platform: the IdP's Redis is unreachable: the revocation is recorded and the IdP refuses the tokens; the gateways get it when Redis is back (until then a fail-open gateway still accepts them)";
