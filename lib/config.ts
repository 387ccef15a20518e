import { readFileSync, statSync } from 'node:fs';
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

const DURATION_UNITS: Readonly<Record<string, number>> = { '': 1, s: 1, m: 60, h: 3600, d: 86_400 };

/**
 * A duration in whole seconds: plain seconds (`90`) or one number with a unit suffix `s`, `m`, `h` or `d`
 * (`90s`, `15m`, `2h`, `30d`). `fallback` and the bounds are in seconds.
 */
export function duration(
  env: Env,
  name: string,
  fallback: number,
  opts: { min: number; max: number },
): number {
  const v = raw(env, name);
  if (v === undefined) return fallback;
  const m = /^(\d{1,9})([smhd]?)$/.exec(v);
  if (!m) throw new ConfigError(name, `must be seconds or a number with s, m, h or d (e.g. 2h), got "${v}"`);
  const n = Number(m[1]) * DURATION_UNITS[m[2]!]!;
  if (n < opts.min || n > opts.max)
    throw new ConfigError(name, `must be between ${opts.min} s and ${opts.max} s, got ${n} s`);
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
  const s = secret(env, name);
  if (s === undefined) throw new ConfigError(name, `is required (or ${name}_FILE, a file holding it)`);
  const url = normaliseDatabaseUrl(s.value, s.from);
  refuseExamplePassword(s.from, url);
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

/** The most a secret file may hold: a PEM key or a URL is a few kB; anything near this is the wrong file. */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * A secret variable's value and the variable it came from: NAME itself, or the file NAME_FILE names (Docker
 * and Kubernetes secrets are files, e.g. `/run/secrets/x`). The file's contents are the value, one trailing
 * newline removed (`echo x > file` adds one); nothing else is trimmed. Both set, a file that cannot be read,
 * is not a regular file, is too large or is empty: a ConfigError naming the variable and the path, never the
 * contents.
 */
export function secret(env: Env, name: string): { value: string; from: string } | undefined {
  const fileVar = `${name}_FILE`;
  const path = raw(env, fileVar);
  const direct = raw(env, name);
  if (path === undefined) return direct === undefined ? undefined : { value: direct, from: name };
  if (direct !== undefined) {
    throw new ConfigError(name, `is set and so is ${fileVar}; set only one of them`);
  }
  let text: string;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw new ConfigError(fileVar, `"${path}" is not a regular file`);
    if (st.size > MAX_SECRET_FILE_BYTES) {
      throw new ConfigError(fileVar, `"${path}" is larger than ${MAX_SECRET_FILE_BYTES} bytes`);
    }
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError(fileVar, `cannot read "${path}" (${code})`);
  }
  const value = text.replace(/\r?\n$/, '');
  if (value.trim() === '') throw new ConfigError(fileVar, `"${path}" is empty`);
  return { value, from: fileVar };
}

/** Whether a secret variable is given at all, as NAME or as NAME_FILE (the file is not read). */
export function secretGiven(env: Env, name: string): boolean {
  return raw(env, name) !== undefined || raw(env, `${name}_FILE`) !== undefined;
}

/** A secret variable (NAME or NAME_FILE), optional: refused when it holds a published example value. */
export function optionalSecret(env: Env, name: string): string | undefined {
  const s = secret(env, name);
  if (s === undefined) return undefined;
  refuseExampleSecret(s.from, s.value, s.from === name ? 'is' : 'names a file holding');
  return s.value;
}

/** A secret variable (NAME or NAME_FILE), required: refused when it holds a published example value. */
export function requiredSecret(env: Env, name: string): string {
  const v = optionalSecret(env, name);
  if (v === undefined) throw new ConfigError(name, `is required (or ${name}_FILE, a file holding it)`);
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
