// An ISO 8601 date or date-time as the admin API, the console and the CLI take it in filters (`since`, `until`).
// Date.parse alone rolls an impossible date over (2026-02-30 becomes March 2), so every field is checked first.

const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:[Zz]|[+-](\d{2}):?(\d{2}))?)?$/;

const daysIn = (year: number, month: number) => new Date(Date.UTC(year, month, 0)).getUTCDate();

/**
 * `2026-11-23`, `2026-11-23T14:00`, `2026-11-23T14:00:05.123Z`, `2026-11-23T14:00+01:00`: the time, or undefined
 * for anything else — a date that does not exist (February 30, month 13), an hour past 23, a minute or second
 * past 59, trailing text. Without an offset a date-time is read as Date.parse reads it.
 */
export function parseIsoTime(value: string): Date | undefined {
  const m = ISO_TIME.exec(value);
  if (!m) return undefined;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined;
  if (m[4] !== undefined && (Number(m[4]) > 23 || Number(m[5]) > 59)) return undefined;
  if (m[6] !== undefined && Number(m[6]) > 59) return undefined;
  if (m[7] !== undefined && (Number(m[7]) > 23 || Number(m[8]) > 59)) return undefined;
  const t = Date.parse(value.replace(' ', 'T'));
  return Number.isNaN(t) ? undefined : new Date(t);
}
