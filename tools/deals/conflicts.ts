import type { Metric } from './model.ts';

/** Spec: a relative gap above 10 percent flags the metric group as a conflict. */
export const CONFLICT_THRESHOLD = 0.1;

export interface Observation {
  value: number;
  source_file: string;
  location: string;
}

export interface ConflictView {
  metric: string;
  min: number;
  max: number;
  relative_gap: number;
  values: Observation[];
}

/**
 * (max − min) relative to the larger magnitude: symmetric in its inputs, defined when one value is zero, and
 * 0 when all agree. 100 vs 111 → 0.099 (no conflict); 100 vs 112 → 0.107 (conflict).
 */
export function relativeGap(min: number, max: number): number {
  const scale = Math.max(Math.abs(min), Math.abs(max));
  return scale === 0 ? 0 : (max - min) / scale;
}

/** Every metric reported more than once whose values spread beyond the threshold; all values are kept. */
export function findConflicts(metrics: readonly Metric[]): ConflictView[] {
  const groups = new Map<string, Metric[]>();
  for (const m of metrics) groups.set(m.name, [...(groups.get(m.name) ?? []), m]);
  const out: ConflictView[] = [];
  for (const [metric, group] of groups) {
    if (group.length < 2) continue;
    const values = group.map((m) => m.value);
    const min = Math.min(...values);
    const max = Math.max(...values);
    const gap = relativeGap(min, max);
    if (gap > CONFLICT_THRESHOLD) {
      out.push({
        metric,
        min,
        max,
        relative_gap: gap,
        values: group.map((m) => ({ value: m.value, source_file: m.source_file, location: m.location })),
      });
    }
  }
  return out;
}
