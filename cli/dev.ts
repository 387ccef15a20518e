import type { Env } from '../lib/config.ts';

/** `platform dev` — not built yet. */
export async function dev(_env: Env): Promise<void> {
  throw new Error('platform dev is not implemented yet');
}
