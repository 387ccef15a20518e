import type { Env } from '../lib/config.ts';
import { onShutdown, SHUTDOWN_LINGER_MS } from '../lib/lifecycle.ts';
import { createLogger } from '../lib/logger.ts';
import { serveMetrics } from '../lib/metrics.ts';
import { startTracing } from '../lib/telemetry/index.ts';
import { loadToolConfig } from './config.ts';
import { createToolMetrics } from './kit/monitors.ts';
import { startToolServer } from './server.ts';

/**
 * `platform tool <name>`: configuration from the environment only, validated before anything connects; the
 * database probe runs before listening. Either failure rejects, and the CLI prints one line and exits non-zero.
 */
export async function main(name: string, env: Env): Promise<void> {
  const config = loadToolConfig(name, env);
  const log = createLogger({
    name: `tool-${config.service}`,
    level: config.logLevel,
    // Two lines a call: batched writes (lib/logger.ts BatchedOutput, docs/performance.md § The tool path).
    batched: true,
  });
  const metrics = config.metricsPort === undefined ? undefined : createToolMetrics(config.service);
  // Without OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT nothing of OpenTelemetry is loaded.
  const tracing = await startTracing(config.telemetry, log);
  const server = await startToolServer(config.service, config, { log, metrics, tracing }).catch(
    (err: Error) => {
      // Into the JSON log as well, where operators look first; the CLI still prints the one-line reason.
      log.fatal({ reason: err.message }, 'start-up failed');
      throw err;
    },
  );
  // After the probe: a server that cannot start serves no metrics either (its exit is the signal).
  const metricsServer = metrics && (await serveMetrics(metrics.registry, config.metricsPort!, log));
  onShutdown(log, async () => {
    await server.close({ lingerMs: SHUTDOWN_LINGER_MS });
    await metricsServer?.close();
    await tracing?.shutdown();
  });
}
