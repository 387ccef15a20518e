import type { Env } from '../lib/config.ts';
import { onShutdown } from '../lib/lifecycle.ts';
import { createLogger } from '../lib/logger.ts';
import { loadIdpConfig } from './config.ts';
import { type RunningIdp, startIdp } from './server.ts';

/** `platform idp`: configuration from the environment only, validated before listening. */
export async function main(env: Env): Promise<void> {
  const config = loadIdpConfig(env);
  const log = createLogger({ name: 'idp', level: config.logLevel });
  // Installed before listening, so a SIGTERM that arrives during start-up still exits cleanly.
  let idp: RunningIdp | undefined;
  onShutdown(log, async () => idp?.close());
  idp = await startIdp(config, { log });
}
