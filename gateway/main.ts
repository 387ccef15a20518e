import type { Env } from '../lib/config.ts';
import { onShutdown } from '../lib/lifecycle.ts';
import { createLogger } from '../lib/logger.ts';
import { loadGatewayConfig } from './config.ts';
import { startGateway } from './server.ts';

/** `platform gateway`: configuration from the environment only, validated before listening. */
export async function main(env: Env): Promise<void> {
  const config = loadGatewayConfig(env);
  const log = createLogger({ name: 'gateway', level: config.logLevel });
  const gateway = await startGateway(config, { log });
  onShutdown(log, () => gateway.close());
  // Reloading swaps the rules between requests; nothing in flight is dropped (and SIGHUP no longer ends us).
  process.on('SIGHUP', () => void gateway.reloadPolicy());
}
