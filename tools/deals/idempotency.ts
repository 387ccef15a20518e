import { createHash } from 'node:crypto';
import { ToolError } from '../kit/tool-errors.ts';

/** Spec: idempotency records are retained 24 hours. */
export const IDEMPOTENCY_RETENTION_HOURS = 24;

/** The same idempotency key with a different payload (spec: 409 IdempotencyConflict). */
export class IdempotencyConflictError extends ToolError {
  constructor(key: string) {
    super(
      'IdempotencyConflict',
      `idempotency_key "${key}" was already used with a different payload in the last ${IDEMPOTENCY_RETENTION_HOURS} h; use a new key for a new proposal`,
      409,
    );
  }
}

// JSON with object keys sorted at every level, so equal payloads hash equally whatever order a client used.
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

export function requestHash(payload: unknown): string {
  return createHash('sha256').update(canonical(payload)).digest('hex');
}
