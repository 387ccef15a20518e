import { type Env, httpUrl, normaliseDatabaseUrl, oneOf, port } from '../lib/config.ts';
import { redisUrl } from '../lib/redis/config.ts';

/** Settings of the IdP refresh-grant benchmark (make bench-idp); every one optional. */
export interface IdpBenchConfig {
  /** BENCH_SECONDS: measured seconds of grants after the warm-up (and as many of bare signing beside them). */
  seconds: number;
  /**
   * BENCH_ROUNDS: the measured seconds are split into this many rounds, each a slice of bare signing (the load
   * paused) then a slice of grants, so a drift in the shared machine's speed hits both sides of the ratio alike.
   */
  rounds: number;
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
  /**
   * BENCH_KEY_ROTATION: `auto` runs the IdP with PLATFORM_KEY_ROTATION=auto on a schedule of seconds (publish
   * ahead 4 s, lifetime 6 s), so keys rotate during the measurement; `off` (default): a static key.
   */
  keyRotation: 'off' | 'auto';
  /** BENCH_IDP_BIN: the bin/platform.js to run (default this checkout's; another's to measure a baseline). */
  idpBin: string | undefined;
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
    rounds: Math.round(positive(env, 'BENCH_ROUNDS', 5)),
    adminDatabaseUrl: normaliseDatabaseUrl(
      env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres',
      'BENCH_DATABASE_URL',
    ),
    redisUrl: redisUrl(env, 'BENCH_REDIS_URL') ?? 'redis://127.0.0.1:6379',
    idpLogLevel: env.BENCH_IDP_LOG_LEVEL ?? 'info',
    idpNodeOptions: env.BENCH_IDP_NODE_OPTIONS || undefined,
    path: env.PATH,
    keyRotation: oneOf(env, 'BENCH_KEY_ROTATION', ['off', 'auto'] as const, 'off'),
    idpBin: env.BENCH_IDP_BIN || undefined,
  });
}

/** Settings of the gateway benchmark (make bench-gateway); every one optional. */
export interface GatewayBenchConfig {
  /** BENCH_DURATION: seconds of load per target, split over the rounds. */
  duration: number;
  /** BENCH_ROUNDS: direct and gateway runs alternate this many times, so drift in the machine's load hits both. */
  rounds: number;
  /** BENCH_CONNECTIONS */
  connections: number;
  /** REDIS_URL */
  redisUrl: string;
  /** BENCH_LOADGEN: `raw` sockets (default) or `autocannon`. */
  loadgen: 'raw' | 'autocannon';
  /** BENCH_GATEWAY_NODE_OPTIONS, e.g. --cpu-prof, for the gateway process. */
  gatewayNodeOptions: string | undefined;
  /** BENCH_HAPROXY: the reference proxy's binary (default: `haproxy` on PATH, then /usr/sbin), or `off`. */
  haproxy: string | undefined;
  /**
   * BENCH_GATEWAY_BASELINE: another checkout's bin/platform.js (e.g. the main branch's), measured in the same
   * run beside this one (with and without the policy), so a change is compared under the same machine load.
   */
  baseline: string | undefined;
  /**
   * BENCH_PERF: `on` (perf on PATH) or a perf binary: each measured run is recorded with `perf record -C 0`, and a
   * second table says where core 0's time went per request (bench/gateway/core-split.ts). Off by default.
   */
  perf: string | undefined;
  /** The environment the benchmark's own child processes (upstream, load generator) inherit. */
  childEnv: Env;
}

export function loadGatewayBenchConfig(env: Env): GatewayBenchConfig {
  const loadgen = env.BENCH_LOADGEN ?? 'raw';
  if (loadgen !== 'raw' && loadgen !== 'autocannon') {
    throw new Error(`BENCH_LOADGEN: must be raw or autocannon, got "${loadgen}"`);
  }
  return Object.freeze({
    duration: positive(env, 'BENCH_DURATION', 12),
    rounds: Math.round(positive(env, 'BENCH_ROUNDS', 3)),
    connections: Math.round(positive(env, 'BENCH_CONNECTIONS', 50)),
    redisUrl: redisUrl(env, 'REDIS_URL') ?? 'redis://127.0.0.1:6379',
    loadgen,
    gatewayNodeOptions: env.BENCH_GATEWAY_NODE_OPTIONS || undefined,
    haproxy: env.BENCH_HAPROXY || undefined,
    baseline: env.BENCH_GATEWAY_BASELINE || undefined,
    perf: env.BENCH_PERF === 'on' ? 'perf' : env.BENCH_PERF || undefined,
    childEnv: env,
  });
}

/**
 * The bare forwarder's settings (bench/gateway/bare-forwarder.ts), read from the variables the gateway benchmark
 * starts every gateway with.
 */
export interface BareForwarderConfig {
  /** GATEWAY_PORT */
  port: number;
  /** BENCH_MCP_UPSTREAM: the benchmark's upstream, as the gateway's service is pointed at it. */
  upstream: URL;
}

export function loadBareForwarderConfig(env: Env): BareForwarderConfig {
  const upstream = httpUrl(env, 'BENCH_MCP_UPSTREAM');
  if (upstream === undefined) throw new Error('BENCH_MCP_UPSTREAM: required');
  return Object.freeze({ port: port(env, 'GATEWAY_PORT', 0), upstream: new URL(upstream) });
}

/** Settings of the tool-server benchmark (make bench-tools); every one optional. */
export interface ToolsBenchConfig {
  /**
   * BENCH_DURATION: seconds of load per target, split over the rounds (default 30 s in 5 rounds: on a shared
   * VM a 4-second round of this ~1–2k req/s load swings ±15 %, and the ratios need the longer run).
   */
  duration: number;
  /** BENCH_ROUNDS: the targets' runs alternate this many times. */
  rounds: number;
  /** BENCH_CONNECTIONS */
  connections: number;
  /** BENCH_DATABASE_URL: a server where the benchmark may create and drop its own database. */
  adminDatabaseUrl: string;
  /** REDIS_URL (the gateway's) */
  redisUrl: string;
  /** BENCH_TOOL_LOG_LEVEL: the tool server's and gateway's LOG_LEVEL (default info, as deployed). */
  logLevel: string;
  /** BENCH_GATEWAY_NODE_OPTIONS and BENCH_TOOL_NODE_OPTIONS (e.g. --cpu-prof) for those two processes. */
  gatewayNodeOptions: string | undefined;
  toolNodeOptions: string | undefined;
  /** The environment the benchmark's child processes inherit. */
  childEnv: Env;
}

export function loadToolsBenchConfig(env: Env): ToolsBenchConfig {
  return Object.freeze({
    duration: positive(env, 'BENCH_DURATION', 30),
    rounds: Math.round(positive(env, 'BENCH_ROUNDS', 5)),
    connections: Math.round(positive(env, 'BENCH_CONNECTIONS', 50)),
    adminDatabaseUrl: normaliseDatabaseUrl(
      env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres',
      'BENCH_DATABASE_URL',
    ),
    redisUrl: redisUrl(env, 'REDIS_URL') ?? 'redis://127.0.0.1:6379',
    logLevel: env.BENCH_TOOL_LOG_LEVEL ?? 'info',
    gatewayNodeOptions: env.BENCH_GATEWAY_NODE_OPTIONS || undefined,
    toolNodeOptions: env.BENCH_TOOL_NODE_OPTIONS || undefined,
    childEnv: env,
  });
}
