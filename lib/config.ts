import { isExampleSecret } from './example-secrets.ts';

// Helpers for the per-process config modules. Each reads one variable from the environment object it is
// given (never process.env directly) and throws ConfigError naming the variable and what is wrong.

export type Env = Readonly<Record<string, string | undefined>>;

export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

function raw(env: Env, name: string): string | undefined {
  const v = env[name];
  if (v === undefined) return undefined;
  const t = v.trim();
  return t === '' ? undefined : t;
}

export function optionalString(env: Env, name: string): string | undefined {
  return raw(env, name);
}

export function requiredString(env: Env, name: string): string {
  const v = raw(env, name);
  if (v === undefined) throw new ConfigError(name, 'is required');
  return v;
}

export function port(env: Env, name: string, fallback: number): number {
  const v = raw(env, name);
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v)) throw new ConfigError(name, `must be a port number, got "${v}"`);
  const n = Number(v);
  if (n < 0 || n > 65535) throw new ConfigError(name, `must be between 0 and 65535, got ${n}`);
  return n;
}

/**
 * METRICS_PORT: where the process serves Prometheus text (`GET /metrics`); unset: no metrics listener. It must
 * differ from the public port, so the metrics never become reachable through the proxy.
 */
export function metricsPort(env: Env, publicPort: number, name = 'METRICS_PORT'): number | undefined {
  if (raw(env, name) === undefined) return undefined;
  const p = port(env, name, 0);
  if (p === 0) throw new ConfigError(name, 'must be a port number between 1 and 65535');
  if (p === publicPort) throw new ConfigError(name, `must differ from the public port ${publicPort}`);
  return p;
}

/** A whole number within `min`..`max`; unset: `fallback`. */
export function integer(
  env: Env,
  name: string,
  fallback: number,
  opts: { min: number; max: number },
): number {
  const v = raw(env, name);
  if (v === undefined) return fallback;
  if (!/^\d{1,9}$/.test(v)) throw new ConfigError(name, `must be a whole number, got "${v}"`);
  const n = Number(v);
  if (n < opts.min || n > opts.max)
    throw new ConfigError(name, `must be between ${opts.min} and ${opts.max}, got ${n}`);
  return n;
}

export function csv(env: Env, name: string, fallback: readonly string[] = []): string[] {
  const v = raw(env, name);
  if (v === undefined) return [...fallback];
  return v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** An absolute http(s) URL without a trailing slash (issuers and base URLs are compared as strings). */
export function httpUrl(
  env: Env,
  name: string,
  value: string | undefined = raw(env, name),
): string | undefined {
  if (value === undefined) return undefined;
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigError(name, `must be an absolute http(s) URL, got "${value}"`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new ConfigError(name, `must be an http(s) URL, got "${value}"`);
  }
  if (u.search || u.hash) throw new ConfigError(name, 'must not carry a query or fragment');
  return value.replace(/\/+$/, '');
}

/**
 * DATABASE_URL: only `postgresql://` or `postgresql+asyncpg://` (the latter is the Python services' spelling
 * of the same server; it is normalised for node-postgres). A SQLite path or anything else fails at start-up.
 */
export function databaseUrl(env: Env, name = 'DATABASE_URL'): string {
  const v = requiredString(env, name);
  const url = normaliseDatabaseUrl(v, name);
  refuseExamplePassword(name, url);
  return url;
}

export function normaliseDatabaseUrl(v: string, name = 'DATABASE_URL'): string {
  const m = /^(postgresql(?:\+asyncpg)?):\/\//.exec(v);
  if (!m) {
    throw new ConfigError(
      name,
      'must begin with postgresql:// or postgresql+asyncpg:// (a PostgreSQL server, not a file path)',
    );
  }
  const url = `postgresql://${v.slice(m[0].length)}`;
  try {
    new URL(url);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  return url;
}

export function redisUrl(env: Env, name = 'REDIS_URL'): string | undefined {
  const v = raw(env, name);
  if (v === undefined) return undefined;
  if (!/^rediss?:\/\//.test(v)) throw new ConfigError(name, 'must begin with redis:// or rediss://');
  refuseExamplePassword(name, v);
  return v;
}

/**
 * Start-up refuses secrets published as examples in deploy/env.example or the documentation
 * (lib/example-secrets.ts): one line naming the variable, never the value.
 */
export function refuseExampleSecret(name: string, value: string | undefined, what = 'is'): void {
  if (value !== undefined && isExampleSecret(value)) {
    throw new ConfigError(
      name,
      `${what} an example value from deploy/env.example or the documentation; set a secret of your own`,
    );
  }
}

/** A secret variable, optional: refused when it holds a published example value. */
export function optionalSecret(env: Env, name: string): string | undefined {
  const v = raw(env, name);
  refuseExampleSecret(name, v);
  return v;
}

/** A secret variable, required: refused when it holds a published example value. */
export function requiredSecret(env: Env, name: string): string {
  const v = requiredString(env, name);
  refuseExampleSecret(name, v);
  return v;
}

/** The password inside a URL variable (DATABASE_URL, REDIS_URL), refused when it is a published example. */
function refuseExamplePassword(name: string, url: string): void {
  let password: string;
  try {
    password = decodeURIComponent(new URL(url).password);
  } catch {
    return;
  }
  if (password !== '') refuseExampleSecret(name, password, 'carries a password that is');
}

export function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const v = raw(env, name);
  if (v === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(v)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${v}"`);
  }
  return v as T;
}

export function logLevel(env: Env): string {
  return oneOf(env, 'LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info');
}
