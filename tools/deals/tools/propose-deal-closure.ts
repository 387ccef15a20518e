import { z } from 'zod';
import type { Pool } from '../../../lib/db.ts';
import { NO_MONITORS, type ToolMonitors } from '../../kit/monitors.ts';
import { type AnyTool, defineTool } from '../../kit/tool.ts';
import { findConflicts } from '../conflicts.ts';
import type { DealEntities } from '../entities.ts';
import { type Citation, citationSchema, isDurable, metricSchema } from '../model.ts';
import { proposeClosure } from '../store/closures.ts';

export function proposeDealClosureTool(
  pool: Pool,
  entities: DealEntities,
  monitors: ToolMonitors = NO_MONITORS,
): AnyTool {
  return defineTool({
    name: 'propose_deal_closure',
    title: 'Propose deal closure',
    description:
      'Records a proposed deal closure with its metrics (each with its source) and citations. Idempotent per ' +
      'idempotency_key for 24 h: repeating a call returns the same artifact with was_inserted false; the same key ' +
      'with a different payload is an IdempotencyConflict. Metrics whose sources disagree by more than 10 % are ' +
      'recorded as conflicts (see get_conflicts), never resolved silently.',
    input: z.object({
      deal_id: z.string().trim().min(1).max(200),
      metrics: z.array(metricSchema).min(1).max(1000),
      citations: z
        .array(z.union([citationSchema, z.string().min(1).max(2000)]))
        .max(1000)
        .describe('anchored citations; a plain string is a quoted-text (fragile) anchor'),
      idempotency_key: z.string().min(1).max(200),
      skill: z
        .string()
        .trim()
        .min(1)
        .max(200)
        .optional()
        .describe('provenance: the skill that produced this; default manual'),
    }),
    output: z.object({
      artifact_id: z.string(),
      was_inserted: z.boolean(),
      schema_version: z.number().int(),
      conflicts: z.array(z.object({ metric: z.string(), relative_gap: z.number() })),
    }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    async run(args, { identity, requestId }) {
      await entities.require(identity, args.deal_id, 'write');
      const citations: Citation[] = args.citations.map((c) =>
        typeof c === 'string' ? { anchor_type: 'text', anchor: c } : c,
      );
      const conflicts = findConflicts(args.metrics);
      const r = await proposeClosure(
        pool,
        {
          dealId: args.deal_id,
          skill: args.skill ?? 'manual',
          body: { metrics: args.metrics, citations },
          conflicts,
          idempotencyKey: args.idempotency_key,
        },
        { email: identity.email, sub: identity.sub, requestId },
      );
      if (r.wasInserted) {
        const durable = citations.filter(isDurable).length;
        monitors.citationsWritten(durable, citations.length - durable);
      }
      return {
        artifact_id: r.artifactId,
        was_inserted: r.wasInserted,
        schema_version: r.schemaVersion,
        conflicts: conflicts.map((c) => ({ metric: c.metric, relative_gap: c.relative_gap })),
      };
    },
  });
}
