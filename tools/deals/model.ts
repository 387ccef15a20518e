import { z } from 'zod';

// The deal-closure artifact as the tools and readers see it (the current schema version's shape).

/**
 * Durable anchors survive re-rendering and re-uploading of a source (a content hash, a file identifier, a
 * journal identifier); fragile ones (quoted text, a page number) break when the document is edited or
 * re-paginated, so they are counted and shown rather than trusted (operational check #18, docs/operations.md).
 */
export const DURABLE_ANCHORS = ['content_hash', 'file_id', 'journal_id'] as const;
export const FRAGILE_ANCHORS = ['text', 'page'] as const;
export const ANCHOR_TYPES = [...DURABLE_ANCHORS, ...FRAGILE_ANCHORS] as const;
export type AnchorType = (typeof ANCHOR_TYPES)[number];

export const metricSchema = z.object({
  name: z.string().trim().min(1).max(200),
  value: z.number(),
  source_file: z.string().min(1).max(1000),
  location: z.string().min(1).max(500).describe('where in the source: cell, page, line, …'),
});
export type Metric = z.output<typeof metricSchema>;

export const citationSchema = z.object({
  anchor_type: z.enum(ANCHOR_TYPES),
  anchor: z.string().min(1).max(2000).describe('the hash, file id, journal id, quoted text or page'),
  source_file: z.string().min(1).max(1000).optional(),
  location: z.string().min(1).max(500).optional(),
  metric: z.string().trim().min(1).max(200).optional().describe('the metric this citation supports'),
  value: z.number().optional().describe('the figure as cited; checked against the metric within ±0.001 %'),
});
export type Citation = z.output<typeof citationSchema>;

export interface ClosureBody {
  metrics: Metric[];
  citations: Citation[];
}

export function isDurable(c: Pick<Citation, 'anchor_type'>): boolean {
  return (DURABLE_ANCHORS as readonly string[]).includes(c.anchor_type);
}
