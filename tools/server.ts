import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createPool } from '../lib/db.ts';
import { drain, listen } from '../lib/lifecycle.ts';
import type { Logger } from '../lib/logger.ts';
import type { ToolServerConfig, ToolServiceName } from './config.ts';
import { dealsService } from './deals/server.ts';
import { createToolHandler } from './kit/app.ts';
import { createHostGuard } from './kit/host-guard.ts';
import { probeDatabase } from './kit/probe.ts';
import { createProvisioningCheck } from './kit/provisioning.ts';
import type { ToolService } from './kit/service.ts';
import { createSessionManager, type SessionManager } from './kit/sessions.ts';
import { registerTools } from './kit/tool.ts';
import { mailService } from './mail/server.ts';
import { platformService } from './platform/server.ts';

const SERVICES: Readonly<Record<ToolServiceName, ToolService>> = {
  platform: platformService,
  mail: mailService,
  deals: dealsService,
};

export interface RunningToolServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

export interface ToolServerDeps {
  log: Logger;
  /** Interface to listen on; all interfaces when omitted. */
  host?: string;
}

/**
 * Starts one MCP tool server: pool, start-up probe (before listening; a failure rejects and nothing listens),
 * MCP session manager, HTTP listener. `close()` drains in-flight requests, closes the sessions and releases
 * the pool. `platform tool <name>` and `platform dev` both start servers through this.
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
  let openedSessions: SessionManager | undefined;
  try {
    await probeDatabase(pool, [config.usersTable, ...service.tables]);
    log.info('DB reachable, schema accessible');

    const started = await service.start({ config, pool, log });
    stopService = started.close;
    const sessions = createSessionManager({
      log,
      idleMs: config.sessionIdleMs,
      createServer() {
        const server = new McpServer(
          { name: `platform-${service.name}`, version: service.version },
          { instructions: service.instructions },
        );
        registerTools(server, started.tools, log);
        return server;
      },
    });
    openedSessions = sessions;
    log.info({ tools: started.tools.map((t) => t.name) }, 'MCP session manager started');

    const handler = createToolHandler(
      {
        service: name,
        identityKey: config.identityKey,
        hostGuard: createHostGuard(config.allowedHosts, config.allowedOrigins),
        provisioning: createProvisioningCheck(pool, config.usersTable),
        sessions,
      },
      log,
    );
    const server = createServer(
      { requestTimeout: 30_000, headersTimeout: 10_000, maxHeaderSize: 16 * 1024 },
      handler,
    );
    server.keepAliveTimeout = 65_000;
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
      async close() {
        // Event streams never end on their own; end them first so the drain only waits for real requests.
        sessions.endStreams();
        await drain(server);
        await sessions.close();
        await stopService?.();
        await pool.end();
      },
    };
  } catch (err) {
    await openedSessions?.close().catch(() => {});
    await stopService?.().catch(() => {});
    await pool.end().catch(() => {});
    throw err;
  }
}
