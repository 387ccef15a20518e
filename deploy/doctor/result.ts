// One row of `platform doctor` output. `ref` is the spec's number for the check ("#4") when the check is one
// of the resource-server contract's operational acceptance checks, "-" for the supplementary checks the
// contract's errors table and the platform issuer imply.

export type Verdict = 'PASS' | 'FAIL' | 'SKIP';

export interface CheckRow {
  verdict: Verdict;
  ref: string;
  /** What was checked: a service name, or `issuer`. */
  subject: string;
  name: string;
  detail: string;
}

export interface CheckId {
  ref: string;
  subject: string;
  name: string;
}

export const pass = (id: CheckId, detail: string): CheckRow => ({ verdict: 'PASS', ...id, detail });
export const fail = (id: CheckId, detail: string): CheckRow => ({ verdict: 'FAIL', ...id, detail });
export const skip = (id: CheckId, detail: string): CheckRow => ({ verdict: 'SKIP', ...id, detail });

/** Whether any row failed: the exit code is 0 only when none did. */
export function anyFailed(rows: readonly CheckRow[]): boolean {
  return rows.some((r) => r.verdict === 'FAIL');
}
