import { z } from 'zod';
import { type ClosureBody, citationSchema, metricSchema } from './model.ts';

/**
 * Artifact bodies are stored in the shape of the schema version that wrote them and upgraded when read, so
 * raising the version never rewrites or strands old rows (operational check #21, docs/operations.md).
 *
 * - Version 1: the contract's minimal shape; `citations` are free-text strings (what a caller that knew no
 *   anchors sent). Also the column default, so a row written without a version reads as version 1.
 * - Version 2 (current): a citation is an object with an anchor type (durable or fragile).
 *
 * Raising the version: add the new reader, make CURRENT_SCHEMA_VERSION point at it, keep every older reader.
 */
export const CURRENT_SCHEMA_VERSION = 2;

export class ArtifactDecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArtifactDecodeError';
  }
}

const v1 = z.object({ metrics: z.array(metricSchema), citations: z.array(z.string()).default([]) });
const v2 = z.object({ metrics: z.array(metricSchema), citations: z.array(citationSchema) });

const READERS: Readonly<Record<number, (raw: unknown) => ClosureBody>> = {
  1: (raw) => {
    const b = v1.parse(raw);
    // A version-1 citation is quoted text: a fragile text anchor.
    return {
      metrics: b.metrics,
      citations: b.citations.map((anchor) => ({ anchor_type: 'text' as const, anchor })),
    };
  },
  2: (raw) => v2.parse(raw),
};

export function encodeClosure(body: ClosureBody): { schemaVersion: number; body: ClosureBody } {
  return { schemaVersion: CURRENT_SCHEMA_VERSION, body };
}

export function decodeClosure(schemaVersion: number, raw: unknown): ClosureBody {
  const read = READERS[schemaVersion];
  if (!read) throw new ArtifactDecodeError(`no reader for schema_version ${schemaVersion}`);
  try {
    return read(raw);
  } catch (err) {
    throw new ArtifactDecodeError(
      `schema_version ${schemaVersion} body is malformed: ${(err as Error).message.slice(0, 200)}`,
    );
  }
}
