import { z } from 'zod';
import type { Pool } from '../../../lib/db.ts';
import { NO_MONITORS, type ToolMonitors } from '../../kit/monitors.ts';
import { type AnyTool, defineTool } from '../../kit/tool.ts';
import { ArtifactDecodeError, decodeClosure } from '../artifact-codec.ts';
import { roundTrip } from '../citations.ts';
import type { DealEntities } from '../entities.ts';
import { ANCHOR_TYPES, isDurable } from '../model.ts';
import { listArtifacts } from '../store/reads.ts';

const citationRef = z.object({
  artifact_id: z.string(),
  anchor_type: z.enum(ANCHOR_TYPES),
  anchor: z.string(),
  source_file: z.string().optional(),
  location: z.string().optional(),
});

export function citationStatusTool(
  pool: Pool,
  entities: DealEntities,
  monitors: ToolMonitors = NO_MONITORS,
): AnyTool {
  return defineTool({
    name: 'citation_status',
    title: 'Citation status',
    description:
      'The citation board of a deal: durable vs fragile citations, every fragile one listed, and whether each cited figure reproduces from the stored artifact (±0.001 %).',
    input: z.object({ deal_id: z.string().trim().min(1).max(200) }),
    output: z.object({
      deal_id: z.string(),
      artifacts: z.number().int(),
      total: z.number().int(),
      durable: z.number().int(),
      fragile: z.number().int(),
      fragile_rate: z.number(),
      round_trip: z.object({
        checked: z.number().int(),
        reproduced: z.number().int(),
        failed: z.number().int(),
        unchecked: z.number().int(),
        durable_reproduced_rate: z.number().nullable(),
      }),
      fragile_citations: z.array(citationRef),
      round_trip_failures: z.array(
        citationRef.extend({
          metric: z.string().optional(),
          cited: z.number().optional(),
          stored: z.number().optional(),
          reason: z.string(),
        }),
      ),
      unreadable_artifacts: z.array(
        z.object({ artifact_id: z.string(), schema_version: z.number().int(), reason: z.string() }),
      ),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(args, { identity, log }) {
      await entities.require(identity, args.deal_id, 'read');
      const artifacts = await listArtifacts(pool, args.deal_id);
      let durable = 0;
      let durableChecked = 0;
      let durableReproduced = 0;
      const rt = { checked: 0, reproduced: 0, failed: 0, unchecked: 0 };
      const fragileCitations: z.output<typeof citationRef>[] = [];
      const failures = [];
      const unreadable = [];
      for (const a of artifacts) {
        let body: ReturnType<typeof decodeClosure>;
        try {
          body = decodeClosure(a.schemaVersion, a.body);
        } catch (err) {
          if (!(err instanceof ArtifactDecodeError)) throw err;
          monitors.deserializationFailed();
          // Degrade: one unreadable artifact is reported (and monitored), not allowed to hide the others.
          log.warn(
            { artifactId: a.artifactId, schemaVersion: a.schemaVersion, reason: err.message },
            'artifact deserialization failed',
          );
          unreadable.push({
            artifact_id: a.artifactId,
            schema_version: a.schemaVersion,
            reason: err.message,
          });
          continue;
        }
        for (const c of body.citations) {
          const ref = {
            artifact_id: a.artifactId,
            anchor_type: c.anchor_type,
            anchor: c.anchor,
            ...(c.source_file ? { source_file: c.source_file } : {}),
            ...(c.location ? { location: c.location } : {}),
          };
          const d = isDurable(c);
          if (d) durable++;
          else fragileCitations.push(ref);
          const r = roundTrip(c, body.metrics);
          if (r.outcome === 'unchecked') {
            rt.unchecked++;
            continue;
          }
          rt.checked++;
          if (d) durableChecked++;
          if (r.outcome === 'reproduced') {
            rt.reproduced++;
            if (d) durableReproduced++;
          } else {
            rt.failed++;
            failures.push({ ...ref, metric: c.metric, cited: c.value, stored: r.stored, reason: r.reason });
          }
        }
      }
      const total = durable + fragileCitations.length;
      return {
        deal_id: args.deal_id,
        artifacts: artifacts.length,
        total,
        durable,
        fragile: fragileCitations.length,
        fragile_rate: total === 0 ? 0 : fragileCitations.length / total,
        round_trip: {
          ...rt,
          durable_reproduced_rate: durableChecked === 0 ? null : durableReproduced / durableChecked,
        },
        fragile_citations: fragileCitations,
        round_trip_failures: failures,
        unreadable_artifacts: unreadable,
      };
    },
  });
}
