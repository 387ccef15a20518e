import type { Env } from '../lib/config.ts';
import { onShutdown, SHUTDOWN_LINGER_MS } from '../lib/lifecycle.ts';
import { createLogger } from '../lib/logger.ts';
import { serveMetrics } from '../lib/metrics.ts';
import { startTracing } from '../lib/telemetry/index.ts';
import { loadGatewayConfig } from './config.ts';
import { createGatewayMetrics } from './metrics.ts';
import { startGateway } from './server.ts';

/** `platform gateway`: configuration from the environment only, validated before listening. */
export async function main(env: Env): Promise<void> {
  const config = loadGatewayConfig(env);
  const log = createLogger({ name: 'gateway', level: config.logLevel });
  // Without OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT nothing of OpenTelemetry is loaded.
  const tracing = await startTracing(config.telemetry, log);
  // Without METRICS_PORT nothing is recorded at all, so the request path pays nothing.
  const metrics = config.metricsPort === undefined ? undefined : createGatewayMetrics();
  const metricsServer = metrics && (await serveMetrics(metrics.registry, config.metricsPort!, log));
  const gateway = await startGateway(config, { log, metrics, tracing });
  onShutdown(log, async () => {
    await gateway.close({ lingerMs: SHUTDOWN_LINGER_MS });
    await metricsServer?.close();
    await tracing?.shutdown();
  });
  // Reloading swaps the rules between requests; nothing in flight is dropped (and SIGHUP no longer ends us).
  process.on('SIGHUP', () => void gateway.reloadPolicy());
}
