// The baseline rule of the newer conformance suite (its `--expected-failures`), applied by us to every
// scenario a run wrote — the scored ones, the ones the suite runs without scoring (extensions, pending) and the
// `authorization` command's, which takes no baseline of its own. An entry is a scenario (any of its checks may
// fail) or `scenario:check-id` (that check may fail; every other failing check of the scenario is unexpected).
// A WARNING counts as failing, as in the suite. Unexpected: a failing check no entry excuses. Stale: an entry
// whose scenario or check passed, or whose scenario did not run at all.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface Check {
  id: string;
  status: string;
  errorMessage?: string;
}

export interface Verdict {
  /** `scenario` or `scenario:check-id`, with the check's message. */
  unexpected: string[];
  stale: string[];
  /** Scenarios that ran, by name. */
  ran: string[];
}

const SEVERITY: Record<string, number> = { FAILURE: 3, WARNING: 2, SUCCESS: 1 };
const failing = (c: Check) => c.status === 'FAILURE' || c.status === 'WARNING';

/** Every `<prefix>-<scenario>-<timestamp>/checks.json` under `dir`, by scenario name. */
export async function readResults(dir: string, prefix: string): Promise<Map<string, Check[]>> {
  const results = new Map<string, Check[]>();
  for (const name of await readdir(dir)) {
    const m = new RegExp(`^${prefix}-(.+)-\\d{4}-\\d{2}-\\d{2}T[\\d-]+Z$`).exec(name);
    if (!m) continue;
    results.set(m[1]!, JSON.parse(await readFile(join(dir, name, 'checks.json'), 'utf8')) as Check[]);
  }
  return results;
}

export function judge(results: Map<string, Check[]>, baseline: readonly string[]): Verdict {
  const whole = new Set(baseline.filter((e) => !e.includes(':')));
  const perCheck = new Map<string, Set<string>>();
  for (const e of baseline.filter((x) => x.includes(':'))) {
    const [scenario, check] = [e.slice(0, e.indexOf(':')), e.slice(e.indexOf(':') + 1)];
    perCheck.set(scenario, (perCheck.get(scenario) ?? new Set()).add(check));
  }
  const unexpected: string[] = [];
  const stale: string[] = [];
  for (const [scenario, checks] of results) {
    if (whole.has(scenario)) {
      if (!checks.some(failing)) stale.push(scenario);
      continue;
    }
    // A check id that repeats collapses to its most severe status.
    const byId = new Map<string, Check>();
    for (const c of checks) {
      const seen = byId.get(c.id);
      if (!seen || (SEVERITY[c.status] ?? 0) > (SEVERITY[seen.status] ?? 0)) byId.set(c.id, c);
    }
    const excused = perCheck.get(scenario) ?? new Set<string>();
    for (const c of byId.values())
      if (failing(c) && !excused.has(c.id))
        unexpected.push(`${scenario}:${c.id} (${c.status}: ${c.errorMessage ?? ''})`);
    for (const id of excused) if (byId.get(id)?.status === 'SUCCESS') stale.push(`${scenario}:${id}`);
  }
  for (const scenario of [...whole, ...perCheck.keys()])
    if (!results.has(scenario)) stale.push(`${scenario} (did not run)`);
  return { unexpected, stale, ran: [...results.keys()] };
}
