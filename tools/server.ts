import { createServer } from 'node:http';
import { createPool } from '../lib/db.ts';
import { postgresCheck } from '../lib/health.ts';
import { drain, linger, listen, UPSTREAM_KEEP_ALIVE_MS } from '../lib/lifecycle.ts';
import type { Logger } from '../lib/logger.ts';
import { instrument } from '../lib/metrics.ts';
import type { Tracing } from '../lib/telemetry/index.ts';
import type { ToolServerConfig, ToolServiceName } from './config.ts';
import { dealsService } from './deals/server.ts';
import { createToolHandler } from './kit/app.ts';
import { createHostGuard } from './kit/host-guard.ts';
import { createMcpEndpoint, type McpEndpoint } from './kit/mcp.ts';
import { NO_MONITORS, type ToolMetrics, toolRouteOf } from './kit/monitors.ts';
import { probeDatabase } from './kit/probe.ts';
import { createProvisioningCheck } from './kit/provisioning.ts';
import type { ToolService } from './kit/service.ts';
import { mailService } from './mail/server.ts';
import { platformService } from './platform/server.ts';

/** The MCP revisions every tool server answers on its one endpoint. */
export const MCP_REVISIONS = ['2026-07-28', '2025-11-25', '2025-06-18'] as const;

const SERVICES: Readonly<Record<ToolServiceName, ToolService>> = {
  platform: platformService,
  mail: mailService,
  deals: dealsService,
};

export interface RunningToolServer {
  url: string;
  port: number;
  /**
   * Drains and releases everything. `lingerMs` (the process's SIGTERM path) first hands the kept-alive
   * connections back to their clients (lib/lifecycle.ts `linger`), so a replica stopped under load fails none
   * of the requests the gateway sends it meanwhile.
   */
  close(opts?: { lingerMs?: number }): Promise<void>;
}

export interface ToolServerDeps {
  log: Logger;
  /** Interface to listen on; all interfaces when omitted. */
  host?: string;
  /** Request metrics and the 24-hour monitors; absent: nothing is recorded. */
  metrics?: ToolMetrics;
  /** OpenTelemetry traces (lib/telemetry/); absent: none. */
  tracing?: Tracing | undefined;
}

/**
 * Starts one MCP tool server: pool, start-up probe (before listening; a failure rejects and nothing listens),
 * the stateless MCP endpoint, HTTP listener. `close()` drains in-flight requests, closes the endpoint and
 * releases the pool. `platform tool <name>` and `platform dev` both start servers through this.
 */
export async function startToolServer(
  name: ToolServiceName,
  config: ToolServerConfig,
  deps: ToolServerDeps,
): Promise<RunningToolServer> {
  if (name !== config.service)
    throw new TypeError(`startToolServer: config is for "${config.service}", not "${name}"`);
  const service = SERVICES[name];
  const { log } = deps;
  const pool = createPool(config.databaseUrl, log, { max: 10, applicationName: `platform-tool-${name}` });
  let stopService: (() => Promise<void>) | undefined;
  let endpoint: McpEndpoint | undefined;
  try {
    await probeDatabase(pool, [config.usersTable, ...service.tables]);
    log.info('DB reachable, schema accessible');

    const monitors = deps.metrics?.monitors ?? NO_MONITORS;
    const started = await service.start({ config, pool, log, monitors });
    stopService = started.close;
    const mcp = createMcpEndpoint({
      name: service.name,
      version: service.version,
      instructions: service.instructions,
      tools: started.tools,
      log,
      monitors,
    });
    endpoint = mcp;
    // Operational check #6 (docs/operations.md) looks for this line. There are no sessions to manage any more (every request is
    // served on its own), but the line still marks the same moment: the MCP machinery is ready to serve.
    log.info(
      { tools: started.tools.map((t) => t.name), mode: 'stateless', revisions: MCP_REVISIONS },
      'MCP session manager started',
    );

    const handler = createToolHandler(
      {
        service: name,
        identityKey: config.identityKey,
        hostGuard: createHostGuard(config.allowedHosts, config.allowedOrigins),
        provisioning: createProvisioningCheck(pool, {
          usersTable: config.usersTable,
          cacheMs: config.usersCacheMs,
        }),
        mcp,
        readiness: { postgres: postgresCheck(pool) },
        tracing: deps.tracing,
      },
      log,
    );
    const server = createServer(
      { requestTimeout: 30_000, headersTimeout: 10_000, maxHeaderSize: 16 * 1024 },
      deps.metrics ? instrument(handler, deps.metrics.http, toolRouteOf(name)) : handler,
    );
    // Behind the gateway only (never a load balancer): a short advertised idle time lets the gateway's pool end
    // idle connections itself, which is what makes a graceful stop race-free (see close({ lingerMs })).
    server.keepAliveTimeout = UPSTREAM_KEEP_ALIVE_MS;
    const addr = await listen(server, config.port, deps.host);
    log.info(
      {
        port: addr.port,
        service: name,
        delivery: name === 'mail' ? (config.graph ? 'graph' : 'outbox') : undefined,
      },
      `${name} tool server listening`,
    );
    return {
      port: addr.port,
      url: `http://127.0.0.1:${addr.port}`,
      async close(opts = {}) {
        if (opts.lingerMs) await linger(server, opts.lingerMs);
        await drain(server);
        await mcp.close();
        await stopService?.();
        await pool.end();
      },
    };
  } catch (err) {
    await endpoint?.close().catch(() => {});
    await stopService?.().catch(() => {});
    await pool.end().catch(() => {});
    throw err;
  }
}
