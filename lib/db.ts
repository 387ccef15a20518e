import pg from 'pg';
import type { Logger } from './logger.ts';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export interface PoolOptions {
  max?: number;
  /** How long a request waits for a connection before it fails as "database unavailable". */
  connectionTimeoutMillis?: number;
  applicationName?: string;
  /**
   * How long a connection attempt that failed because the endpoint is between primaries (refused, reset,
   * "the database system is starting up") is retried before the request fails as "database unavailable".
   * 0: not retried.
   */
  connectRetryMillis?: number;
}

/** SQLSTATE 25006 read_only_sql_transaction: the statement reached a standby (or a primary since demoted). */
export const READ_ONLY_SQLSTATE = '25006';

/**
 * A connection of ours. Two rules on top of pg.Client:
 * - an error event never goes unheard: the pool listens only while the client is idle, and a checked-out
 *   client whose server goes away would otherwise crash the process; the query in flight (or the next one)
 *   fails anyway, and that failure is what the caller sees;
 * - a connection that answered 25006 is on a standby: it is closed at once, so whoever holds it cannot give it
 *   back to the pool, and the pool's next connection goes through the write endpoint to the current primary.
 */
class EndpointClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    this.on('error', () => {});
    const conn = (this as unknown as { connection: NodeJS.EventEmitter }).connection;
    conn.on('errorMessage', (msg: { code?: string }) => {
      if (msg.code === READ_ONLY_SQLSTATE) process.nextTick(() => void this.end().catch(() => {}));
    });
  }
}

type ConnectCallback = (
  err: Error | undefined,
  client: pg.PoolClient | undefined,
  done: (release?: unknown) => void,
) => void;

export function createPool(url: string, log: Logger, opts: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    connectionTimeoutMillis: opts.connectionTimeoutMillis ?? 3000,
    idleTimeoutMillis: 30_000,
    application_name: opts.applicationName,
    Client: EndpointClient,
  });
  // An idle client whose server went away emits here; without a listener the process would crash.
  pool.on('error', (err) =>
    log.warn(
      { err: { message: err.message, code: (err as { code?: string }).code } },
      'idle database connection lost',
    ),
  );
  retryThroughSwitch(pool, opts.connectRetryMillis ?? 2000);
  return pool;
}

/**
 * Retries what is safe to retry while the write endpoint moves to a new primary:
 * - a connection attempt that failed (the statement was never sent), for up to `budgetMs`, backing off from
 *   50 ms to 500 ms; pool.connect() and pool.query() both go through it;
 * - a pool.query() statement a standby refused with 25006 (a standby commits nothing), once;
 * - a pool.query() read (see isPlainRead) whose connection was lost, once.
 * A write whose connection was lost after it was sent is never retried: it may have committed. Transactions
 * (pool.connect()) are the caller's: their statements are not retried here.
 */
function retryThroughSwitch(pool: pg.Pool, budgetMs: number): void {
  const p = pool as unknown as {
    connect: (cb?: ConnectCallback) => Promise<pg.PoolClient> | undefined;
    query: (...args: unknown[]) => unknown;
    ending: boolean;
  };
  const connectOnce = p.connect.bind(pool);
  const connectRetrying = (cb: ConnectCallback): void => {
    const started = performance.now();
    const attempt = (n: number) =>
      connectOnce((err, client, done) => {
        const wait = Math.min(500, 50 * 2 ** n);
        if (err && !p.ending && isConnectRetryable(err) && performance.now() - started + wait < budgetMs) {
          setTimeout(() => attempt(n + 1), wait);
          return;
        }
        cb(err, client, done);
      });
    attempt(0);
  };
  p.connect = (cb?: ConnectCallback) => {
    if (cb) {
      connectRetrying(cb);
      return undefined;
    }
    return new Promise<pg.PoolClient>((resolve, reject) =>
      connectRetrying((err, client) => (err ? reject(err) : resolve(client!))),
    );
  };
  const queryOnce = p.query.bind(pool);
  p.query = (...args: unknown[]) => {
    const first = args[0] as string | { text?: string; submit?: unknown } | undefined;
    // Callback and streaming forms go through untouched (they still get the connection retry).
    if (typeof args[args.length - 1] === 'function' || (typeof first === 'object' && first?.submit)) {
      return queryOnce(...args);
    }
    const text = typeof first === 'string' ? first : (first?.text ?? '');
    return (async () => {
      try {
        return await queryOnce(...args);
      } catch (err) {
        if (p.ending || !isStatementRetryable(err, text)) throw err;
        return await queryOnce(...args);
      }
    })();
  };
}

/** A failed connection attempt worth another: the endpoint is there but has no primary behind it yet. */
function isConnectRetryable(err: Error): boolean {
  // The pool being full is not the endpoint's fault: waiting again would only double the wait.
  if (/timeout exceeded when trying to connect/i.test(err.message)) return false;
  return isDatabaseUnavailable(err);
}

/** After a statement was sent: only a standby's refusal, or a lost read, is certain to have changed nothing. */
function isStatementRetryable(err: unknown, text: string): boolean {
  if (!isDatabaseUnavailable(err)) return false;
  if (sqlState(err) === READ_ONLY_SQLSTATE) return true;
  return isPlainRead(text);
}

/**
 * A statement that only reads: it starts with SELECT (or WITH … SELECT without a data-modifying part), takes
 * no row lock and calls none of the functions that change state. A statement that calls a function of its own
 * with side effects is not recognised as one; none of ours does.
 */
export function isPlainRead(text: string): boolean {
  const sql = text.replace(/--[^\n]*/g, ' ').trim();
  if (!/^(SELECT|WITH|VALUES|SHOW|TABLE)\b/i.test(sql)) return false;
  if (sql.includes(';')) return false;
  return !/\b(INSERT|UPDATE|DELETE|MERGE|TRUNCATE|FOR\s+(NO\s+KEY\s+)?UPDATE|FOR\s+(KEY\s+)?SHARE|nextval|setval|pg_advisory\w*|pg_notify|set_config|pg_terminate_backend|pg_cancel_backend)\b/i.test(
    sql,
  );
}

function sqlState(err: unknown): string | undefined {
  return (err as { code?: string } | undefined)?.code;
}

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  READ_ONLY_SQLSTATE, // read_only_sql_transaction: a standby answered (the endpoint has not moved yet)
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down, in recovery)
  '53300', // too_many_connections
  // and every class 08 code (connection exception: 08000, 08001, 08003, 08004, 08006, 08P01, …)
]);

const UNAVAILABLE_MESSAGE =
  /timeout exceeded when trying to connect|Connection terminated|connect ECONNREFUSED|Client has encountered a connection error|Client was closed and is not queryable|Query read timeout/i;

/**
 * True when the error means "the database cannot be reached right now, or is between primaries" rather than a
 * bug: the request is answered 503 and may be retried. A wrapped error counts by its cause.
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (!(err instanceof Error) || depth > 3) return false;
  const code = sqlState(err);
  if (code && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true;
  if (UNAVAILABLE_MESSAGE.test(err.message)) return true;
  if (err instanceof AggregateError && err.errors.some((e) => isDatabaseUnavailable(e, depth + 1)))
    return true;
  return isDatabaseUnavailable(err.cause, depth + 1);
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
