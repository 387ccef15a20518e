import type { Env } from '../lib/config.ts';

/** `platform gateway` — not built yet (issue 3). */
export async function main(_env: Env): Promise<void> {
  throw new Error('platform gateway is not implemented yet');
}
