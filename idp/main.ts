import type { Env } from '../lib/config.ts';
import { onShutdown, SHUTDOWN_LINGER_MS } from '../lib/lifecycle.ts';
import { createLogger } from '../lib/logger.ts';
import { type MetricsServer, serveMetrics } from '../lib/metrics.ts';
import { startTracing } from '../lib/telemetry/index.ts';
import { loadIdpConfig } from './config.ts';
import { createIdpMetrics } from './metrics.ts';
import { type RunningIdp, startIdp } from './server.ts';

/** `platform idp`: configuration from the environment only, validated before listening. */
export async function main(env: Env): Promise<void> {
  const config = loadIdpConfig(env);
  const log = createLogger({ name: 'idp', level: config.logLevel });
  // Without OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT nothing of OpenTelemetry is loaded.
  const tracing = await startTracing(config.telemetry, log);
  // Installed before listening, so a SIGTERM that arrives during start-up still exits cleanly.
  let idp: RunningIdp | undefined;
  let metricsServer: MetricsServer | undefined;
  onShutdown(log, async () => {
    await idp?.close({ lingerMs: SHUTDOWN_LINGER_MS });
    await metricsServer?.close();
    await tracing?.shutdown();
  });
  const metrics = config.metricsPort === undefined ? undefined : createIdpMetrics();
  if (metrics) metricsServer = await serveMetrics(metrics.registry, config.metricsPort!, log);
  idp = await startIdp(config, { log, metrics, tracing });
  // Re-reads the trusted issuers and connections files; a bad one keeps what is in force (and SIGHUP no longer
  // ends us).
  const running = idp;
  process.on('SIGHUP', () => {
    void running.reloadTrustedIssuers();
    void running.reloadConnections();
  });
}
