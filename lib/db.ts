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

/** A database URL fit for a terminal or a log: the password, if any, replaced by `***`. */
export function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

const UNREACHABLE_WORDS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused (is it running?)',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found',
  ETIMEDOUT: 'no answer',
  ECONNRESET: 'connection reset',
};

/**
 * The first failure to reach the database named in one line, with the variable that holds its URL: a stale or
 * mistyped DATABASE_URL is the usual cause, and a bare `connect ECONNREFUSED` names neither. Errors that are
 * not about reaching the server (SQL, permissions) come back as they were.
 */
export function databaseConnectError(err: unknown, url: string, variable: string): Error {
  if (!(err instanceof Error)) return new Error(String(err));
  const code = (err as { code?: string }).code ?? '';
  const words = UNREACHABLE_WORDS[code];
  if (
    !words &&
    !/^(08|57P0|28)/.test(code) &&
    !/timeout exceeded when trying to connect/i.test(err.message)
  ) {
    return err;
  }
  return new Error(
    `cannot reach the database at ${withoutPassword(url)} (${variable}): ${words ?? err.message}`,
    { cause: err },
  );
}

/** Quotes an SQL identifier, optionally schema-qualified (`schema.table`). */
export function ident(name: string): string {
  return name
    .split('.')
    .map((p) => `"${p.replace(/"/g, '""')}"`)
    .join('.');
}
