import { type Env, normaliseDatabaseUrl, redisUrl } from '../lib/config.ts';

/** Settings of the IdP refresh-grant benchmark (make bench-idp); every one optional. */
export interface IdpBenchConfig {
  /** BENCH_SECONDS: measured seconds after the warm-up. */
  seconds: number;
  /** BENCH_DATABASE_URL: a server where the benchmark may create and drop its own database. */
  adminDatabaseUrl: string;
  /** BENCH_REDIS_URL */
  redisUrl: string;
  /** BENCH_IDP_LOG_LEVEL: the IdP's LOG_LEVEL (default info, as deployed). */
  idpLogLevel: string;
  /** BENCH_IDP_NODE_OPTIONS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to see where a grant's time goes. */
  idpNodeOptions: string | undefined;
  /** PATH, handed to the child processes. */
  path: string | undefined;
}

function positive(env: Env, name: string, fallback: number): number {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name}: must be a positive number, got "${v}"`);
  return n;
}

export function loadIdpBenchConfig(env: Env): IdpBenchConfig {
  return Object.freeze({
    seconds: positive(env, 'BENCH_SECONDS', 10),
    adminDatabaseUrl: normaliseDatabaseUrl(
      env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres',
      'BENCH_DATABASE_URL',
    ),
    redisUrl: redisUrl(env, 'BENCH_REDIS_URL') ?? 'redis://127.0.0.1:6379',
    idpLogLevel: env.BENCH_IDP_LOG_LEVEL ?? 'info',
    idpNodeOptions: env.BENCH_IDP_NODE_OPTIONS || undefined,
    path: env.PATH,
  });
}
