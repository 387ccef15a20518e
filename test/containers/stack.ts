// The compose stack under the suite's own project name: deploy/compose.yaml + compose.postgres.yaml + this
// suite's compose.test.yaml, two replicas of the IdP, the gateway and each tool server, every published port
// on 127.0.0.1. Up in two steps (Postgres and Redis first, so the web application's Auth.js tables exist
// before the servers' start-up probes look for them), and always down again with its volumes.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair } from 'jose';
import pg from 'pg';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { freePort } from '../helpers/processes.ts';
import type { ContainerSuiteConfig } from './config.ts';
import { run } from './docker.ts';
import { REPO_DIR, type StackImages } from './images.ts';

export const PROJECT_PREFIX = 'platformctest';
const DEPLOY_DIR = join(REPO_DIR, 'deploy');
const COMPOSE_FILES = [
  join(DEPLOY_DIR, 'compose.yaml'),
  join(DEPLOY_DIR, 'compose.postgres.yaml'),
  join(REPO_DIR, 'test/containers/compose.test.yaml'),
];
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
  /** The images the stack runs (the tests start throwaway containers from them). */
  images: StackImages;
  /** The secrets of the stack's env file that the tests use as an attacker or an operator would. */
  secrets: {
    toolsDbPassword: string;
    redisGatewayPassword: string;
  };
}

export function composeArgs(project: string, envFile: string): string[] {
  return ['-p', project, '--env-file', envFile, ...COMPOSE_FILES.flatMap((f) => ['-f', f])];
}

export function compose(
  cfg: ContainerSuiteConfig,
  info: Pick<StackInfo, 'composeArgs'>,
  args: string[],
  timeoutMs = 300_000,
) {
  return run(cfg.compose, [...info.composeArgs, ...args], { cwd: DEPLOY_DIR, timeoutMs });
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

async function signingKey(): Promise<string> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  return JSON.stringify({ ...jwk, kid: `ctest-${randomBytes(4).toString('hex')}`, alg: 'RS256', use: 'sig' });
}

async function waitFor(what: string, ms: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not ready within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export interface UpReport {
  info: StackInfo;
  /** Seconds from `up` to the proxy answering 200 on a tool server's health route (servers started cold). */
  coldStartSeconds: number;
  /** Seconds for Postgres and Redis to come up and the Auth.js tables to be created. */
  dataStartSeconds: number;
}

export async function stackUp(cfg: ContainerSuiteConfig, images: StackImages): Promise<UpReport> {
  const project = `${PROJECT_PREFIX}${process.pid}x${randomBytes(3).toString('hex')}`;
  const workDir = mkdtempSync(join(tmpdir(), `${project}-`));
  const [proxyPort, prometheusPort, postgresPort] = [await freePort(), await freePort(), await freePort()];
  const baseUrl = `http://127.0.0.1:${proxyPort}`;
  const secret = () => randomBytes(12).toString('hex');
  const postgresPassword = secret();
  const secrets = { toolsDbPassword: secret(), redisGatewayPassword: secret() };
  // Prometheus as deployed, but scraping and evaluating every 2 s so the suite sees series and alerts quickly.
  const promConfig = join(workDir, 'prometheus.yml');
  writeFileSync(
    promConfig,
    readFileSync(join(DEPLOY_DIR, 'prometheus/prometheus.yml'), 'utf8').replace(
      /_interval: 15s/g,
      '_interval: 2s',
    ),
  );
  const env: Record<string, string> = {
    POSTGRES_PASSWORD: postgresPassword,
    DATABASE_ADDRESS: 'postgres:5432/platform',
    PLATFORM_MIGRATE_DB_PASSWORD: secret(),
    PLATFORM_IDP_DB_PASSWORD: secret(),
    PLATFORM_TOOLS_DB_PASSWORD: secrets.toolsDbPassword,
    REDIS_ADMIN_PASSWORD: secret(),
    REDIS_IDP_PASSWORD: secret(),
    REDIS_GATEWAY_PASSWORD: secrets.redisGatewayPassword,
    FRONT_SUBNET: await freeSubnet(cfg),
    PUBLIC_BASE_URL: baseUrl,
    PLATFORM_OIDC_ISSUER: baseUrl,
    PLATFORM_AUDIENCE: baseUrl,
    PLATFORM_OIDC_PRIVATE_KEY: await signingKey(),
    GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
    // What `platform identity-key <service>` prints for each tool server.
    ...Object.fromEntries(
      ['platform', 'mail', 'deals'].map((s) => [
        `${s.toUpperCase()}_TOOL_IDENTITY_KEY`,
        deriveIdentityKey(IDENTITY_SECRET, s),
      ]),
    ),
    PLATFORM_IMAGE: images.platform,
    POSTGRES_IMAGE: images.postgres,
    REDIS_IMAGE: images.redis,
    CADDY_IMAGE: images.caddy,
    PROMETHEUS_IMAGE: images.prometheus,
    PROMETHEUS_CONFIG: promConfig,
    PROXY_HOST_PORT: String(proxyPort),
    PROMETHEUS_HOST_PORT: String(prometheusPort),
    POSTGRES_HOST_PORT: String(postgresPort),
    IDP_REPLICAS: String(REPLICAS),
    GATEWAY_REPLICAS: String(REPLICAS),
    TOOL_REPLICAS: String(REPLICAS),
    LOG_LEVEL: 'info',
    // Every request of the suite comes from one address (the host, through the proxy); the fault runs'
    // refreshes alone exceed the default token limit, which is not what they measure. Registrations are
    // limited low for isolation.test.ts, which counts clients behind the proxy.
    PLATFORM_RATE_LIMITS: `token=100000/60,register=${REGISTER_LIMIT}/60`,
  };
  const envFile = join(workDir, '.env');
  writeFileSync(
    envFile,
    `${Object.entries(env)
      .map(([k, v]) => `${k}=${v}`)
      .join('\n')}\n`,
    { mode: 0o600 },
  );
  const info: StackInfo = {
    project,
    baseUrl,
    prometheusUrl: `http://127.0.0.1:${prometheusPort}`,
    databaseUrl: '',
    envFile,
    workDir,
    composeArgs: composeArgs(project, envFile),
    images,
    secrets,
  };
  try {
    const t0 = performance.now();
    await compose(cfg, info, ['up', '-d', '--no-build', 'postgres', 'redis']);
    info.databaseUrl = `postgresql://platform:${postgresPassword}@127.0.0.1:${postgresPort}/platform`;
    await waitFor('postgres', 60_000, async () => {
      const c = new pg.Client({ connectionString: info.databaseUrl, connectionTimeoutMillis: 2000 });
      try {
        await c.connect();
        await c.query('SELECT 1');
        return true;
      } finally {
        await c.end().catch(() => {});
      }
    });
    // The web application's tables (Auth.js schema): the deployment has them; here the suite plays its part.
    const c = new pg.Client({ connectionString: info.databaseUrl });
    await c.connect();
    try {
      await c.query(readFileSync(join(REPO_DIR, 'idp/authjs/schema.sql'), 'utf8'));
    } finally {
      await c.end();
    }
    // The roles were made at Postgres's first start, before these tables existed: their grants now, as an
    // operator does once the web application has created its tables (docs/deploy.md § Database roles).
    await compose(cfg, info, ['exec', '-T', 'postgres', '/docker-entrypoint-initdb.d/10-platform-roles.sh']);
    const t1 = performance.now();
    await compose(cfg, info, ['up', '-d', '--no-build'], 600_000);
    await waitFor(
      'proxy → gateway → deals',
      120_000,
      async () => (await fetch(`${baseUrl}/deals/health`)).status === 200,
    );
    return {
      info,
      coldStartSeconds: Math.round((performance.now() - t1) / 100) / 10,
      dataStartSeconds: Math.round((t1 - t0) / 100) / 10,
    };
  } catch (err) {
    // What the containers said, before they are gone with the stack.
    const logs = await compose(cfg, info, ['logs', '--no-color', '--tail', '15']).catch(() => undefined);
    if (logs)
      process.stdout.write(`[containers] the stack did not come up; its last log lines:\n${logs.stdout}\n`);
    await stackDown(cfg, info).catch(() => {});
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

export async function stackDown(cfg: ContainerSuiteConfig, info: StackInfo): Promise<void> {
  try {
    await compose(cfg, info, ['down', '-v', '--remove-orphans', '-t', '20'], 180_000);
  } finally {
    rmSync(info.workDir, { recursive: true, force: true });
  }
}
