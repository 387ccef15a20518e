import type { Citation, Metric } from './model.ts';

/** Spec: citation round-trip tolerance, relative error within ±0.001 percent. */
export const ROUND_TRIP_TOLERANCE = 0.00001;

export function withinTolerance(cited: number, stored: number): boolean {
  if (cited === stored) return true;
  return Math.abs(cited - stored) <= ROUND_TRIP_TOLERANCE * Math.max(Math.abs(cited), Math.abs(stored));
}

export type RoundTrip =
  | { outcome: 'reproduced'; stored: number }
  | { outcome: 'failed'; reason: string; stored?: number }
  | { outcome: 'unchecked' };

/**
 * Does the figure a citation quotes come back out of the stored artifact? It is compared with the stored
 * metric of the same name (from the same source file when the citation names one). A citation that quotes no
 * figure has nothing to reproduce and is `unchecked`.
 */
export function roundTrip(citation: Citation, metrics: readonly Metric[]): RoundTrip {
  if (citation.metric === undefined || citation.value === undefined) return { outcome: 'unchecked' };
  const candidates = metrics.filter(
    (m) =>
      m.name === citation.metric &&
      (citation.source_file === undefined || m.source_file === citation.source_file),
  );
  if (candidates.length === 0)
    return { outcome: 'failed', reason: 'the cited metric is not in the artifact' };
  const hit = candidates.find((m) => withinTolerance(citation.value!, m.value));
  if (hit) return { outcome: 'reproduced', stored: hit.value };
  return {
    outcome: 'failed',
    reason: 'the stored value differs by more than 0.001 %',
    stored: candidates[0]!.value,
  };
}
