import type { Pool } from '../../lib/db.ts';
import type { Logger } from '../../lib/logger.ts';
import type { ToolServerConfig } from '../config.ts';
import type { ToolMonitors } from './monitors.ts';
import type { AnyTool } from './tool.ts';

export interface ServiceContext {
  config: ToolServerConfig;
  pool: Pool;
  log: Logger;
  /** The contract's 24-hour monitors (no-ops without METRICS_PORT). */
  monitors: ToolMonitors;
}

export interface StartedService {
  tools: readonly AnyTool[];
  /** Releases what start() created (timers, clients); the pool is the kit's. */
  close?(): Promise<void>;
}

/** One tool server's own part: its tools and the tables its start-up probe must find. */
export interface ToolService {
  name: string;
  version: string;
  instructions?: string;
  /** Relations the probe checks, beyond the users table every server reads. */
  tables: readonly string[];
  start(ctx: ServiceContext): Promise<StartedService>;
}
