import pg from 'pg';
import type { Logger } from './logger.ts';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export interface PoolOptions {
  max?: number;
  /** How long a request waits for a connection before it fails as "database unavailable". */
  connectionTimeoutMillis?: number;
  applicationName?: string;
}

export function createPool(url: string, log: Logger, opts: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    connectionTimeoutMillis: opts.connectionTimeoutMillis ?? 3000,
    idleTimeoutMillis: 30_000,
    application_name: opts.applicationName,
  });
  // An idle client whose server went away emits here; without a listener the process would crash.
  pool.on('error', (err) =>
    log.warn(
      { err: { message: err.message, code: (err as { code?: string }).code } },
      'idle database connection lost',
    ),
  );
  return pool;
}

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EPIPE',
  'EHOSTUNREACH',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '53300', // too_many_connections
]);

/** True when the error means "the database cannot be reached right now" rather than a bug. */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: string }).code;
  if (code && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true;
  return /timeout exceeded when trying to connect|Connection terminated|connect ECONNREFUSED|Client has encountered a connection error/i.test(
    err.message,
  );
}

/** Quotes an SQL identifier, optionally schema-qualified (`schema.table`). */
export function ident(name: string): string {
  return name
    .split('.')
    .map((p) => `"${p.replace(/"/g, '""')}"`)
    .join('.');
}
