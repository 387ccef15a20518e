// The compose stack under the suite's own project name: a trial deployment (`platform trial-env`, profile
// `trial`) of deploy/compose.yaml + compose.postgres.yaml, with this suite's compose.test.yaml (published
// ports) and, for the tests, compose.health.yaml (health checks every 3 s); two replicas of the IdP, the
// gateway and each tool server, every published port on 127.0.0.1; up with the documented `up -d` — first as
// shipped, timed, then again with the tests' health checks — and always down again with its volumes.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { freePort, PLATFORM_BIN } from '../helpers/processes.ts';
import type { ContainerSuiteConfig } from './config.ts';
import { run } from './docker.ts';
import { REPO_DIR, type StackImages } from './images.ts';

export const PROJECT_PREFIX = 'platformctest';
export const DEPLOY_DIR = join(REPO_DIR, 'deploy');
/** The shipped files and the suite's published ports: the stack a user's `up -d` starts (health checks as shipped). */
const SHIPPED_FILES = [
  join(DEPLOY_DIR, 'compose.yaml'),
  join(DEPLOY_DIR, 'compose.postgres.yaml'),
  join(REPO_DIR, 'test/containers/compose.test.yaml'),
];
/** The tests' stack: the same, with health checks every 3 s (a restarted container is healthy in seconds). */
const TEST_FILES = [...SHIPPED_FILES, join(REPO_DIR, 'test/containers/compose.health.yaml')];
export const REPLICAS = 2;
/** PLATFORM_RATE_LIMITS's `register` in the stack: per client address, per minute. */
export const REGISTER_LIMIT = 5;
export const IDENTITY_SECRET = `ctest-${randomBytes(24).toString('hex')}`;

/** What the tests need to reach and drive the stack; plain data, handed from the global setup to the tests. */
export interface StackInfo {
  project: string;
  /** `{base_url}`: the proxy's published port on 127.0.0.1. */
  baseUrl: string;
  prometheusUrl: string;
  /** The stack's own Postgres through its published loopback port. */
  databaseUrl: string;
  envFile: string;
  workDir: string;
  composeArgs: string[];
  /** The images the stack runs, as `make images` named them in the .env (the tests start throwaway containers from them). */
  images: StackImages;
  /** The secrets of the stack's env file that the tests use as an attacker or an operator would. */
  secrets: {
    toolsDbPassword: string;
    redisGatewayPassword: string;
  };
}

/** The compose arguments of the tests' stack; `shippedHealth`: without the suite's 3 s health checks. */
export function composeArgs(project: string, envFile: string, shippedHealth = false): string[] {
  const files = shippedHealth ? SHIPPED_FILES : TEST_FILES;
  return ['-p', project, '--env-file', envFile, ...files.flatMap((f) => ['-f', f])];
}

export function compose(
  cfg: ContainerSuiteConfig,
  info: Pick<StackInfo, 'composeArgs'>,
  args: string[],
  timeoutMs = 300_000,
  env?: NodeJS.ProcessEnv,
) {
  return run(cfg.compose, [...info.composeArgs, ...args], { cwd: DEPLOY_DIR, timeoutMs, env });
}

/** Projects left by a run that died before its teardown (SIGKILL, power): their pid no longer exists. */
export async function removeAbandonedStacks(cfg: ContainerSuiteConfig): Promise<string[]> {
  const { stdout } = await run(cfg.docker, [
    'ps',
    '-a',
    '--filter',
    'label=com.docker.compose.project',
    '--format',
    '{{.Label "com.docker.compose.project"}}',
  ]);
  const abandoned = [...new Set(stdout.split('\n').map((s) => s.trim()))].filter((p) => {
    const m = new RegExp(`^${PROJECT_PREFIX}(\\d+)x`).exec(p);
    if (!m) return false;
    try {
      process.kill(Number(m[1]), 0);
      return false;
    } catch {
      return true;
    }
  });
  for (const project of abandoned) {
    const ids = (
      await run(cfg.docker, ['ps', '-aq', '--filter', `label=com.docker.compose.project=${project}`])
    ).stdout
      .split('\n')
      .filter(Boolean);
    if (ids.length > 0) await run(cfg.docker, ['rm', '-f', '-v', ...ids]);
    await run('sh', [
      '-c',
      `"${cfg.docker}" network ls -q --filter label=com.docker.compose.project=${project} | xargs -r "${cfg.docker}" network rm`,
    ]);
    await run('sh', [
      '-c',
      `"${cfg.docker}" volume ls -q --filter label=com.docker.compose.project=${project} | xargs -r "${cfg.docker}" volume rm`,
    ]);
  }
  return abandoned;
}

/**
 * A /24 for the `front` network (FRONT_SUBNET) that no network of this engine uses: compose gives it a fixed
 * subnet, which the IdP trusts for X-Forwarded-For.
 */
async function freeSubnet(cfg: ContainerSuiteConfig): Promise<string> {
  const { stdout } = await run('sh', [
    '-c',
    `"${cfg.docker}" network inspect $("${cfg.docker}" network ls -q) --format '{{range .IPAM.Config}}{{.Subnet}} {{end}}'`,
  ]);
  const ipv4 = (cidr: string): [number, number] | undefined => {
    const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(cidr);
    if (!m) return undefined;
    const bits = Number(m[5]);
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    return [(((+m[1]! << 24) | (+m[2]! << 16) | (+m[3]! << 8) | +m[4]!) & mask) >>> 0, mask];
  };
  const used = stdout
    .split(/\s+/)
    .map(ipv4)
    .filter((x) => x !== undefined);
  // 172.16.x.x: outside Docker's default pools (172.17-31, 192.168), which later networks are taken from.
  for (let third = 200; third < 255; third++) {
    const candidate = `172.16.${third}.0/24`;
    const [net, mask] = ipv4(candidate)!;
    // Two blocks overlap when either contains the other's first address.
    if (used.every(([n, m]) => (net & m) >>> 0 !== n && (n & mask) >>> 0 !== net)) return candidate;
  }
  throw new Error('no free 172.16.x.0/24 for the front network');
}

async function waitFor(what: string, ms: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not ready within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export interface Prepared {
  info: StackInfo;
  /** The settings as written to the env file. */
  env: Readonly<Record<string, string>>;
}

/** The project image's tag in the suite's .env (`make images --tag`). */
export const PLATFORM_TAG = 'platform-test/platform-identity:latest';

/** `platform trial-env`'s output, as a trial's operator writes deploy/.env with it. */
async function trialEnv(o: {
  port: number;
  frontSubnet: string;
  project: string;
}): Promise<Map<string, string>> {
  const { stdout } = await run(process.execPath, [
    PLATFORM_BIN,
    'trial-env',
    '--port',
    String(o.port),
    '--front-subnet',
    o.frontSubnet,
    '--project',
    o.project,
  ]);
  const out = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) out.set(m[1]!, m[2]!);
  }
  return out;
}

/**
 * The stack's settings: a trial's deploy/.env as `platform trial-env` writes it (profile `trial`: the bundled
 * Postgres with the web application's tables and the sign-in page), then the suite's own values over it —
 * loopback ports, replicas, Prometheus's fast schedule, the rate limits it measures. No image line: `make
 * images` (images.ts) writes those into this file afterwards, as docs/deploy.md § Offline hosts says.
 */
export async function prepareStack(cfg: ContainerSuiteConfig): Promise<Prepared> {
  const project = `${PROJECT_PREFIX}${process.pid}x${randomBytes(3).toString('hex')}`;
  const workDir = mkdtempSync(join(tmpdir(), `${project}-`));
  const [proxyPort, prometheusPort, postgresPort] = [await freePort(), await freePort(), await freePort()];
  // The trial's issuer is http://localhost:<port>; the suite reaches the same proxy by address.
  const baseUrl = `http://localhost:${proxyPort}`;
  // Prometheus as deployed, but scraping and evaluating every 2 s so the suite sees series and alerts quickly.
  const promConfig = join(workDir, 'prometheus.yml');
  writeFileSync(
    promConfig,
    readFileSync(join(DEPLOY_DIR, 'prometheus/prometheus.yml'), 'utf8').replace(
      /_interval: 15s/g,
      '_interval: 2s',
    ),
  );
  const env = await trialEnv({ port: proxyPort, frontSubnet: await freeSubnet(cfg), project });
  const overrides: Record<string, string> = {
    // The suite's own identity secret (the tests sign identity headers with it) and the keys derived from it.
    GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
    ...Object.fromEntries(
      ['platform', 'mail', 'deals'].map((s) => [
        `${s.toUpperCase()}_TOOL_IDENTITY_KEY`,
        deriveIdentityKey(IDENTITY_SECRET, s),
      ]),
    ),
    PROMETHEUS_CONFIG: promConfig,
    PROMETHEUS_HOST_PORT: String(prometheusPort),
    POSTGRES_HOST_PORT: String(postgresPort),
    IDP_REPLICAS: String(REPLICAS),
    GATEWAY_REPLICAS: String(REPLICAS),
    TOOL_REPLICAS: String(REPLICAS),
    LOG_LEVEL: 'info',
    // No administrator: the tests make their own users, none of whom should be one by accident.
    PLATFORM_ADMIN_EMAILS: '',
    // Every request of the suite comes from one address (the host, through the proxy); the fault runs'
    // refreshes alone exceed the default token limit, which is not what they measure. Registrations are
    // limited low for isolation.test.ts, which counts clients behind the proxy.
    PLATFORM_RATE_LIMITS: `token=100000/60,register=${REGISTER_LIMIT}/60`,
  };
  for (const [k, v] of Object.entries(overrides)) env.set(k, v);
  const envFile = join(workDir, '.env');
  writeFileSync(envFile, `${[...env].map(([k, v]) => `${k}=${v}`).join('\n')}\n`, { mode: 0o600 });
  const info: StackInfo = {
    project,
    baseUrl,
    prometheusUrl: `http://127.0.0.1:${prometheusPort}`,
    databaseUrl: `postgresql://platform:${env.get('POSTGRES_PASSWORD')}@127.0.0.1:${postgresPort}/platform`,
    envFile,
    workDir,
    composeArgs: composeArgs(project, envFile),
    // Filled in from the .env once `make images` has written it (global-setup.ts).
    images: { platform: PLATFORM_TAG, node: '', postgres: '', redis: '', caddy: '', prometheus: '' },
    secrets: {
      toolsDbPassword: env.get('PLATFORM_TOOLS_DB_PASSWORD')!,
      redisGatewayPassword: env.get('REDIS_GATEWAY_PASSWORD')!,
    },
  };
  return { info, env: Object.fromEntries(env) };
}

export interface UpReport {
  /** Seconds from `up -d` to the proxy answering 200 on a tool server's health route (servers started cold). */
  coldStartSeconds: number;
}

/** The route the cold start waits for: proxy → gateway → a deals tool server. */
const HEALTH_ROUTE = '/deals/health';

/**
 * `docker compose up -d`, as documented, with the images already there (`make images` built them): compose
 * builds nothing. Every container, the trial's sign-in among them, starts from the one command; the tool
 * servers wait for the web application's tables, which the sign-in creates. `shippedHealth`: the shipped
 * files' health checks (30 s for the servers and the proxy), which gate compose's start order — the user's
 * cold start; otherwise the tests' 3 s ones.
 */
export async function stackUp(
  cfg: ContainerSuiteConfig,
  info: StackInfo,
  o: { shippedHealth?: boolean } = {},
): Promise<UpReport> {
  const args = o.shippedHealth ? { composeArgs: composeArgs(info.project, info.envFile, true) } : info;
  try {
    const t0 = performance.now();
    await compose(cfg, args, ['up', '-d'], 600_000);
    await waitFor(
      'proxy → gateway → deals',
      // As shipped, each link of the start chain waits for its dependency's first check, 30 s apart.
      o.shippedHealth ? 420_000 : 180_000,
      async () => (await fetch(`${info.baseUrl}${HEALTH_ROUTE}`)).status === 200,
    );
    return { coldStartSeconds: Math.round((performance.now() - t0) / 100) / 10 };
  } catch (err) {
    // What the containers said, before they are gone with the stack.
    const logs = await compose(cfg, args, ['logs', '--no-color', '--tail', '15']).catch(() => undefined);
    if (logs)
      process.stdout.write(`[containers] the stack did not come up; its last log lines:\n${logs.stdout}\n`);
    throw err;
  }
}

export async function stackLogs(
  cfg: ContainerSuiteConfig,
  info: StackInfo,
  services: string[] = [],
): Promise<string> {
  const { stdout } = await compose(cfg, info, ['logs', '--no-color', ...services]);
  return stdout;
}

/** `down -v`: the containers, networks and volumes gone; `keepWorkDir` keeps the .env for another `up`. */
export async function stackDown(
  cfg: ContainerSuiteConfig,
  info: StackInfo,
  o: { keepWorkDir?: boolean } = {},
): Promise<void> {
  try {
    await compose(cfg, info, ['down', '-v', '--remove-orphans', '-t', '20'], 180_000);
  } finally {
    if (!o.keepWorkDir) rmSync(info.workDir, { recursive: true, force: true });
  }
}
