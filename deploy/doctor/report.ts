import type { CheckRow } from './result.ts';

/** The rows as aligned columns: `PASS  #2  platform  health route under public host  200 …`. */
export function formatRows(rows: readonly CheckRow[]): string {
  const width = (pick: (r: CheckRow) => string) => Math.max(0, ...rows.map((r) => pick(r).length));
  const ref = width((r) => r.ref);
  const subject = width((r) => r.subject);
  const name = width((r) => r.name);
  return rows
    .map((r) =>
      [r.verdict, r.ref.padEnd(ref), r.subject.padEnd(subject), r.name.padEnd(name), oneLine(r.detail)]
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Counts per verdict. Worded so no log reader mistakes it for a test runner's "N passed, N failed" line. */
export function formatSummary(rows: readonly CheckRow[]): string {
  const count = (v: CheckRow['verdict']) => rows.filter((r) => r.verdict === v).length;
  return `summary: PASS ${count('PASS')} / FAIL ${count('FAIL')} / SKIP ${count('SKIP')}`;
}

// A detail quoting a response body must not break the one-row-per-check shape.
function oneLine(s: string): string {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length > 300 ? `${flat.slice(0, 299)}…` : flat;
}
