// `make bench-tools`: what our tool server costs over the MCP SDK v2 alone, and what the gateway costs in front
// of it, for MCP 2026-07-28 `tools/call whoami` (no handshake, one POST per call), 50 connections.
//
// Four targets in one run, their runs alternating in rounds (the machine is shared; a slow patch then hits all
// of them alike):
//   bare SDK v2     bench/tools/bare-server.ts: createMcpHandler answering the same tool, no database, no identity
//   direct          `platform tool platform`, each request with the gateway's signed identity headers
//   gateway         the same tool server behind `platform gateway`, each request with an RS256 platform token
//   plain handler   bench/tools/plain-handler.ts: node:http reading and parsing the same request, answering the
//                   tool server's own answer bytes with the same headers (the least any JSON server does)
// Servers on core 0, the load generator on core 1 (taskset), as `make bench-gateway` pins them.
// Targets: direct ≥ 0.7 × bare; gateway ≥ 0.6 × direct; direct's CPU per request ≤ 2 × the plain handler's
// (the `tool server / plain handler (CPU)` line, printed once).
//
// BENCH_DURATION (seconds per target, default 30), BENCH_ROUNDS (5), BENCH_CONNECTIONS (50),
// BENCH_DATABASE_URL (a server to create a scratch database on), REDIS_URL, BENCH_TOOL_LOG_LEVEL (info),
// BENCH_GATEWAY_NODE_OPTIONS / BENCH_TOOL_NODE_OPTIONS (NODE_OPTIONS of those processes, e.g. --cpu-prof).
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processEnv } from '../cli/config.ts';
import { bodySha256, deriveIdentityKey, signIdentity } from '../lib/identity.ts';
import { loadToolsBenchConfig } from './config.ts';
import { cpuSeconds, firstJsonLine, freePort, PIN, spawnNode } from './gateway/processes.ts';
import { combine, type Measured } from './lib/latencies.ts';
import { startBenchIssuer } from './lib/platform-issuer.ts';
import { createScratchDatabase } from './lib/scratch-database.ts';
import {
  AUDIENCE,
  type LoadResult,
  type LoadSpec,
  MCP_HEADERS,
  REQUEST_BODY,
  rawRequest,
  SERVICE,
} from './tools/shape.ts';

const config = loadToolsBenchConfig(processEnv());
const root = fileURLToPath(new URL('../', import.meta.url));
const BARE = join(root, 'bench/tools/bare-server.ts');
const PLAIN = join(root, 'bench/tools/plain-handler.ts');
const LOAD_GENERATOR = join(root, 'bench/tools/load-generator.ts');
const PLATFORM_BIN = join(root, 'bin/platform.js');
const IDENTITY_SECRET = 'bench-identity-secret-0123456789abcdef0123';
const USERS = 50;
const PATH = `/${SERVICE}/mcp`;

interface Target {
  name: string;
  url: string;
  /** Builds the requests just before a run (signed identity headers are good for 60 s). */
  requests(): string[];
  /** Processes whose CPU time is counted (server first). */
  watch: ChildProcess[];
  runs: Measured[];
}

async function scratchDatabase() {
  const db = await createScratchDatabase(config.adminDatabaseUrl, 'bench_tools');
  for (let i = 0; i < USERS; i++) {
    await db.pool.query('INSERT INTO users (name, email) VALUES ($1, $2)', [
      `u${i}`,
      `bench-${i}@example.com`,
    ]);
  }
  return db;
}

async function load(spec: LoadSpec): Promise<LoadResult> {
  return firstJsonLine<LoadResult>(spawnNode(1, [LOAD_GENERATOR, JSON.stringify(spec)], config.childEnv));
}

async function main(): Promise<void> {
  const { duration, rounds, connections } = config;
  const scratch = mkdtempSync(join(tmpdir(), 'bench-tools-'));
  const children: ChildProcess[] = [];
  const db = await scratchDatabase();
  const keys = await startBenchIssuer({ audience: AUDIENCE, service: SERVICE, users: USERS });
  const cleanup = () => {
    for (const c of children) c.kill('SIGTERM');
    keys.close();
    rmSync(scratch, { recursive: true, force: true });
  };
  try {
    const bare = spawnNode(0, [BARE], config.childEnv);
    children.push(bare);
    const { port: barePort } = await firstJsonLine<{ port: number }>(bare);

    const toolPort = await freePort();
    const toolKey = deriveIdentityKey(IDENTITY_SECRET, SERVICE);
    const tool = spawnNode(0, [PLATFORM_BIN, 'tool', SERVICE], {
      PATH: config.childEnv.PATH,
      DATABASE_URL: db.url,
      TOOL_IDENTITY_KEY: toolKey,
      PLATFORM_MCP_PORT: String(toolPort),
      LOG_LEVEL: config.logLevel,
      NODE_OPTIONS: config.toolNodeOptions,
    });
    children.push(tool);
    await firstJsonLine(tool, (l) => l.msg === `${SERVICE} tool server listening`);

    const gatewayPort = await freePort();
    const gateway = spawnNode(0, [PLATFORM_BIN, 'gateway'], {
      PATH: config.childEnv.PATH,
      GATEWAY_PORT: String(gatewayPort),
      PUBLIC_BASE_URL: `http://127.0.0.1:${gatewayPort}`,
      GATEWAY_SERVICES: SERVICE,
      PLATFORM_MCP_UPSTREAM: `http://127.0.0.1:${toolPort}`,
      PLATFORM_ISSUER: keys.issuer,
      PLATFORM_JWKS_URL: `${keys.issuer}/keys`,
      PLATFORM_AUDIENCE: AUDIENCE,
      REDIS_URL: config.redisUrl,
      GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
      LOG_LEVEL: config.logLevel,
      NODE_OPTIONS: config.gatewayNodeOptions,
    });
    children.push(gateway);
    await firstJsonLine(gateway, (l) => l.msg === 'gateway listening');

    const host = (port: number) => `127.0.0.1:${port}`;
    /** The gateway's identity headers for caller i, signed now over the benchmark's request. */
    const signed = (i: number) =>
      signIdentity(
        toolKey,
        {
          service: SERVICE,
          method: 'POST',
          path: PATH,
          bodySha256: bodySha256(Buffer.from(REQUEST_BODY)),
        },
        {
          email: `bench-${i}@example.com`,
          sub: `bench-user-${i}`,
          issuer: 'platform',
          scope: `openid email mcp:${SERVICE}`,
          clientId: 'platform-cli',
          jti: randomUUID(),
          requestId: randomUUID(),
        },
      );

    // The plain handler answers with the tool server's own answer to this request (a caller's, its bytes).
    const sample = await fetch(`http://${host(toolPort)}${PATH}`, {
      method: 'POST',
      headers: { ...MCP_HEADERS, ...signed(0) },
      body: REQUEST_BODY,
    });
    const answer = await sample.text();
    if (sample.status !== 200) throw new Error(`tool server answered ${sample.status}: ${answer}`);
    const plain = spawnNode(0, [PLAIN, answer], config.childEnv);
    children.push(plain);
    const { port: plainPort } = await firstJsonLine<{ port: number }>(plain);

    const targets: Target[] = [
      {
        name: 'bare SDK v2 (floor)',
        url: `http://${host(barePort)}`,
        requests: () => [rawRequest(host(barePort), PATH, MCP_HEADERS, REQUEST_BODY)],
        watch: [bare],
        runs: [],
      },
      {
        name: 'tool server, signed headers',
        url: `http://${host(toolPort)}`,
        requests: () =>
          Array.from({ length: USERS }, (_, i) =>
            rawRequest(host(toolPort), PATH, { ...MCP_HEADERS, ...signed(i) }, REQUEST_BODY),
          ),
        watch: [tool],
        runs: [],
      },
      {
        name: 'tool server via gateway',
        url: `http://${host(gatewayPort)}`,
        requests: () =>
          keys.tokens.map((t) =>
            rawRequest(
              host(gatewayPort),
              PATH,
              { ...MCP_HEADERS, authorization: `Bearer ${t}` },
              REQUEST_BODY,
            ),
          ),
        watch: [tool, gateway],
        runs: [],
      },
      {
        name: 'plain node:http handler',
        url: `http://${host(plainPort)}`,
        // The tool server's request as sent to it, identity headers included (the handler reads, not checks, them).
        requests: () =>
          Array.from({ length: USERS }, (_, i) =>
            rawRequest(host(plainPort), PATH, { ...MCP_HEADERS, ...signed(i) }, REQUEST_BODY),
          ),
        watch: [plain],
        runs: [],
      },
    ];

    const run = async (t: Target, seconds: number): Promise<Measured> => {
      const file = join(scratch, `requests-${randomUUID()}.json`);
      writeFileSync(file, JSON.stringify(t.requests()));
      const before = t.watch.map((c) => cpuSeconds(c.pid));
      const r = await load({ url: t.url, requestsFile: file, connections, duration: seconds });
      const after = t.watch.map((c) => cpuSeconds(c.pid));
      return {
        ...r,
        cpuUsPerRequest: t.watch.map((_, i) =>
          before[i] === undefined || after[i] === undefined
            ? Number.NaN
            : ((after[i]! - before[i]!) * 1e6) / r.total,
        ),
      };
    };

    // Warm-up: key-set fetch and token cache in the gateway, users cache in the tool server, the JIT everywhere.
    for (const t of targets) await run(t, Math.min(3, duration));
    const slice = duration / rounds;
    for (let i = 0; i < rounds; i++) for (const t of targets) t.runs.push(await run(t, slice));

    const [bareR, directR, viaR, plainR] = targets.map((t) => combine(t.runs)) as [
      Measured,
      Measured,
      Measured,
      Measured,
    ];
    const ratio = (a: Target, b: Target) =>
      a.runs.map((r, i) => `${(r.requestsPerSecond / b.runs[i]!.requestsPerSecond).toFixed(3)}×`).join(', ');
    const cell = (v: number | undefined) =>
      (v === undefined || Number.isNaN(v) ? '—' : v.toFixed(0)).padStart(9);
    const row = (t: Target, r: Measured) =>
      `| ${t.name.padEnd(28)} | ${r.requestsPerSecond.toFixed(0).padStart(7)} | ${r.p50.toFixed(2).padStart(6)} | ${r.p99
        .toFixed(2)
        .padStart(
          6,
        )} | ${cell(r.cpuUsPerRequest[0])} | ${cell(r.cpuUsPerRequest[1])} | ${String(r.non2xx + r.errors).padStart(6)} |`;
    const cpuRatio = (a: Measured, b: Measured) => a.cpuUsPerRequest[0]! / b.cpuUsPerRequest[0]!;
    const cpuRounds = targets[1]!.runs.map((r, i) => cpuRatio(r, targets[3]!.runs[i]!).toFixed(3)).join(', ');
    const directOverBare = directR.requestsPerSecond / bareR.requestsPerSecond;
    const viaOverDirect = viaR.requestsPerSecond / directR.requestsPerSecond;
    const lines = [
      '',
      `tools benchmark: MCP 2026-07-28 tools/call whoami (POST ${PATH}, ${Buffer.byteLength(REQUEST_BODY)} B), ${connections} connections, ${USERS} callers, ${duration} s per target in ${rounds} alternating rounds; LOG_LEVEL ${config.logLevel}`,
      `machine: ${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, Node ${process.versions.node}; ${
        PIN
          ? 'servers on core 0, load generator on core 1 (taskset)'
          : 'NOT pinned (taskset or a second core missing)'
      }`,
      '',
      '| target                       |   req/s | p50 ms | p99 ms | server µs | gateway µs | errors |',
      '|------------------------------|---------|--------|--------|-----------|------------|--------|',
      ...targets.map((t) => row(t, combine(t.runs))),
      '',
      `tool server / bare SDK: ${directOverBare.toFixed(3)}× (target ≥ 0.7×); per round: ${ratio(targets[1]!, targets[0]!)}`,
      `gateway / direct:       ${viaOverDirect.toFixed(3)}× (target ≥ 0.6×); per round: ${ratio(targets[2]!, targets[1]!)}`,
      `tool server / plain handler (CPU): ${cpuRatio(directR, plainR).toFixed(3)} (target ≤ 2; ${directR.cpuUsPerRequest[0]!.toFixed(1)} / ${plainR.cpuUsPerRequest[0]!.toFixed(1)} µs); per round: ${cpuRounds}`,
      `CPU per request: bare ${bareR.cpuUsPerRequest[0]!.toFixed(0)} µs, plain handler ${plainR.cpuUsPerRequest[0]!.toFixed(0)} µs, tool server ${directR.cpuUsPerRequest[0]!.toFixed(0)} µs; through the gateway: tool server ${viaR.cpuUsPerRequest[0]!.toFixed(0)} µs + gateway ${viaR.cpuUsPerRequest[1]!.toFixed(0)} µs`,
      '',
    ];
    process.stdout.write(lines.join('\n'));
    if (targets.some((t) => t.runs.some((r) => r.non2xx + r.errors > 0))) {
      process.stdout.write('some requests failed: the figures above are not valid\n');
      process.exitCode = 1;
    }
  } finally {
    cleanup();
    await db.drop().catch(() => {});
  }
}

await main();
