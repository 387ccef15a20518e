import { z } from 'zod';
import type { Pool } from '../../../lib/db.ts';
import { type AnyTool, defineTool } from '../../kit/tool.ts';
import type { DealEntities } from '../entities.ts';
import { listConflicts } from '../store/reads.ts';

const observation = z.object({ value: z.number(), source_file: z.string(), location: z.string() });

export function getConflictsTool(pool: Pool, entities: DealEntities): AnyTool {
  return defineTool({
    name: 'get_conflicts',
    title: 'Get metric conflicts',
    description:
      "A deal's cross-source metric conflicts (relative gap above 10 %): per metric the min, max, relative gap and every value with its source.",
    input: z.object({ deal_id: z.string().trim().min(1).max(200) }),
    output: z.object({
      deal_id: z.string(),
      conflicts: z.array(
        z.object({
          metric: z.string(),
          artifact_id: z.string(),
          min: z.number(),
          max: z.number(),
          relative_gap: z.number(),
          values: z.array(observation),
          recorded_at: z.string(),
        }),
      ),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(args, { identity }) {
      await entities.require(identity, args.deal_id, 'read');
      return { deal_id: args.deal_id, conflicts: await listConflicts(pool, args.deal_id) };
    },
  });
}
