// `make bench-gateway`: the gateway's cost over talking to the tool server directly, beside HAProxy in C
// (verifying RS256 only, and doing the gateway's whole job).
//
// Shape (issue: gateway benchmark): an MCP `tools/call` POST of ~300 bytes to a minimal node:http upstream that
// answers a fixed ~500-byte JSON-RPC result; 50 connections; 50 distinct valid RS256 tokens (rotating, so the
// verified-token cache holds 50 entries and revocation is checked on every request); real Redis. The upstream
// and the proxy under test are pinned to core 0, the load generator to core 1, and the same load is run
// straight at the upstream, through the gateway, through a second gateway with a 50-rule per-tool policy
// (bench/gateway/policy.ts; the ratio to the first is the policy's cost), through a third gateway where the
// service has an upstream connection (each request carries the user's upstream token, from the gateway's cache,
// under identity v4; the ratio to the first is that cost) and, when `haproxy` is installed, through HAProxy twice
// (bench/gateway/haproxy.ts): verifying RS256 only — the reference the issue's target is named after — and
// doing the gateway's whole per-request job. Two more gateways measure the observability and limits work: one with
// OpenTelemetry tracing at 100 % sampling exporting OTLP/HTTP to a sink this script runs (target ≥ 0.75× the
// gateway without), and one with the 50-rule policy plus a rate limit that never triggers (counted in Redis on
// every request; target ≥ 0.95× the policy alone). With telemetry unset the gateway loads nothing of
// OpenTelemetry: BENCH_GATEWAY_BASELINE (the build before it) measures that against this one in the same run.
// The architecture's floor is measured in every run too: the bare relay (bench/gateway/bare-forwarder.ts, node:http
// + undici and nothing else; target: the gateway ≥ 0.80× it), and the physical cost of a DPoP proof, one ES256
// verification with node:crypto on the gateway's core (bench/gateway/es256-verify.ts; target: DPoP's added
// gateway CPU ≤ 2× it). The lines the targets are read from are printed last, each once, for grep:
//   DPoP added CPU / ES256 verify: <ratio>, gateway / bare relay: <ratio>, gateway / HAProxy (same job): <ratio>
//
//   node bench/gateway-proxy.ts                 orchestrates and prints the table
//   bench/gateway/upstream.ts, bench/gateway/load-generator.ts, bench/gateway/haproxy.ts: what it starts
//
// BENCH_DURATION (seconds of load per target, default 12), BENCH_ROUNDS (default 3: the targets' runs
// alternate, so a change in the shared machine's load hits all of them alike), BENCH_CONNECTIONS (default 50),
// REDIS_URL (default the local one), BENCH_LOADGEN (`raw`, the default, or `autocannon`),
// BENCH_GATEWAY_NODE_OPTIONS (NODE_OPTIONS for the gateway process, e.g. --cpu-prof), BENCH_HAPROXY (the
// references' binary, or `off`), BENCH_GATEWAY_BASELINE (another checkout's bin/platform.js, measured beside
// this one with and without the policy: before/after in one run), BENCH_PERF (`on` or a perf binary: where core 0's
// time goes per request, by process and kind of code).
// All are read by bench/config.ts.
import type { ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { calculateJwkThumbprint, type JWK } from 'jose';
import { processEnv } from '../cli/config.ts';
import { loadGatewayBenchConfig } from './config.ts';
import {
  addRun,
  emptyTargetCoreTime,
  perfUsable,
  readCoreTime,
  recordCore,
  SPLIT_HEADER,
  splitRow,
  type TargetCoreTime,
  threadsOf,
} from './gateway/core-split.ts';
import { findHaproxy, startHaproxy } from './gateway/haproxy.ts';
import { benchPolicy } from './gateway/policy.ts';
import { cpuSeconds, firstJsonLine, freePort, PIN, spawnNode as spawnPinned } from './gateway/processes.ts';
import {
  AUDIENCE,
  type LoadResult,
  type LoadSpec,
  REQUEST_BODY,
  RESPONSE_BODY,
  SERVICE,
} from './gateway/shape.ts';
import { BENCH_GATEWAY_CLIENT_SECRET, startBenchTokenEndpoint } from './gateway/token-endpoint.ts';
import { combine, type Measured } from './lib/latencies.ts';
import { startBenchIssuer } from './lib/platform-issuer.ts';

const config = loadGatewayBenchConfig(processEnv());
const UPSTREAM = fileURLToPath(new URL('./gateway/upstream.ts', import.meta.url));
const LOAD_GENERATOR = fileURLToPath(new URL('./gateway/load-generator.ts', import.meta.url));
const BARE_RELAY = fileURLToPath(new URL('./gateway/bare-forwarder.ts', import.meta.url));
const ES256_VERIFY = fileURLToPath(new URL('./gateway/es256-verify.ts', import.meta.url));
const PLATFORM_BIN = fileURLToPath(new URL('../bin/platform.js', import.meta.url));
const IDENTITY_SECRET = 'bench-identity-secret-0123456789abcdef0123';

const spawnNode = (core: number, args: string[], env: NodeJS.ProcessEnv = config.childEnv): ChildProcess =>
  spawnPinned(core, args, env);

/** BENCH_PERF: core 0 recorded during each measured run, into this file (one run at a time). */
const perfFile = (dir: string) => join(dir, 'core0.perf');

/**
 * One load run, plus the CPU time each watched process spent per request during it. With `split` (BENCH_PERF),
 * core 0 is recorded meanwhile and the samples of the upstream's and the proxy's threads added to it.
 */
async function measure(
  spec: LoadSpec,
  watch: [ChildProcess, ChildProcess | undefined],
  split?: { perf: string; dir: string; into: TargetCoreTime },
): Promise<LoadResult & { cpuUsPerRequest: number[] }> {
  const recording = split && recordCore(split.perf, 0, perfFile(split.dir));
  const before = watch.map((c) => cpuSeconds(c?.pid));
  const r = await load(spec);
  const after = watch.map((c) => cpuSeconds(c?.pid));
  if (split && recording) {
    await recording.stop();
    const time = readCoreTime(split.perf, perfFile(split.dir));
    addRun(split.into, time, { upstream: threadsOf(watch[0].pid), proxy: threadsOf(watch[1]?.pid) }, r.total);
  }
  return {
    ...r,
    cpuUsPerRequest: watch.map((_, i) =>
      before[i] === undefined || after[i] === undefined
        ? Number.NaN
        : ((after[i]! - before[i]!) * 1e6) / r.total,
    ),
  };
}

/** One thing the load is aimed at: the upstream itself, or a proxy (whose process's CPU is watched) before it. */
interface Target {
  name: string;
  url: string;
  /** The DPoP target: bound tokens and a fresh proof per request. */
  dpop?: LoadSpec['dpop'];
  proxy: ChildProcess | undefined;
  runs: Measured[];
}

/** One request per token, each answered 200: key sets fetched and tokens cached before anything is measured. */
async function firstRequests(url: string, tokens: string[]): Promise<void> {
  for (const t of tokens) {
    const r = await fetch(`${url}/${SERVICE}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
      body: REQUEST_BODY,
    });
    if (r.status !== 200) throw new Error(`${url} answered ${r.status}: ${await r.text()}`);
    await r.arrayBuffer();
  }
}

async function load(spec: LoadSpec): Promise<LoadResult> {
  const child = spawnNode(1, [LOAD_GENERATOR, JSON.stringify(spec)]);
  return firstJsonLine<LoadResult>(child);
}

async function orchestrate(): Promise<void> {
  const { duration, connections, redisUrl, rounds } = config;

  // The platform issuer's key set, served from here (one fetch by the gateway; never on the measured path).
  // One DPoP key per user for the DPoP target (its tokens carry cnf.jkt; proofs are signed by the load generator).
  const dpopKeys = Array.from({ length: 50 }, () =>
    generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' }),
  );
  const jkts = await Promise.all(
    dpopKeys.map(({ d: _d, ...pub }) => calculateJwkThumbprint(pub as JWK, 'sha256')),
  );
  const platform = await startBenchIssuer({ audience: AUDIENCE, service: SERVICE, users: 50, jkts });
  const { issuer, tokens, boundTokens, publicKey } = platform;
  // The IdP's token endpoint for the upstream-connection target (exchanges happen before the measured runs).
  const tokenEndpoint = await startBenchTokenEndpoint();

  const children: ChildProcess[] = [];
  const scratch = mkdtempSync(join(tmpdir(), 'bench-gateway-'));
  // The OTLP sink the traced gateway exports to.
  const sink = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  const cleanup = () => {
    sink.close();
    for (const c of children) c.kill('SIGTERM');
    platform.close();
    tokenEndpoint.close();
    rmSync(scratch, { recursive: true, force: true });
  };
  process.on('exit', cleanup);
  try {
    const upstream = spawnNode(0, [UPSTREAM]);
    children.push(upstream);
    const { port: upstreamPort } = await firstJsonLine<{ port: number }>(upstream);
    const upstreamUrl = `http://127.0.0.1:${upstreamPort}`;

    /** A `platform gateway` before the upstream, pinned beside it; `extra` adds to its environment. */
    const startGateway = async (extra: Record<string, string> = {}, bin = PLATFORM_BIN) => {
      const port = await freePort();
      const child = spawnNode(0, [bin, 'gateway'], {
        PATH: config.childEnv.PATH,
        GATEWAY_PORT: String(port),
        PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
        GATEWAY_SERVICES: SERVICE,
        BENCH_MCP_UPSTREAM: upstreamUrl,
        PLATFORM_ISSUER: issuer,
        PLATFORM_JWKS_URL: `${issuer}/keys`,
        PLATFORM_AUDIENCE: AUDIENCE,
        REDIS_URL: redisUrl,
        GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
        LOG_LEVEL: 'info',
        // e.g. BENCH_GATEWAY_NODE_OPTIONS=--cpu-prof to profile the gateway under this load.
        NODE_OPTIONS: config.gatewayNodeOptions,
        ...extra,
      });
      children.push(child);
      await firstJsonLine(child, (l) => l.msg === 'gateway listening');
      return { child, url: `http://127.0.0.1:${port}` };
    };
    const gateway = await startGateway();
    // The same gateway with a 50-rule per-tool policy (bench/gateway/policy.ts): the decision on every request.
    const policyFile = join(scratch, 'policy.yaml');
    writeFileSync(policyFile, benchPolicy(SERVICE, tokens.length));
    const withPolicy = await startGateway({ GATEWAY_POLICY_FILE: policyFile });
    // The same service with an upstream connection: every request carries the user's upstream token (cached).
    const connected = await startGateway({
      BENCH_UPSTREAM_CONNECTION: 'bench',
      GATEWAY_CLIENT_SECRET: BENCH_GATEWAY_CLIENT_SECRET,
      GATEWAY_TOKEN_URL: tokenEndpoint.url,
    });
    // Tracing on, every request sampled, spans exported to the sink (it only answers 200).
    sink.listen(0, '127.0.0.1');
    await new Promise((r) => sink.once('listening', r));
    const traced = await startGateway({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(sink.address() as AddressInfo).port}`,
      OTEL_TRACES_SAMPLER: 'always_on',
    });
    // The same policy with a per-email limit no load reaches: the limit's own cost, a Redis round trip each.
    const limitedFile = join(scratch, 'policy-limited.yaml');
    writeFileSync(
      limitedFile,
      `${benchPolicy(SERVICE, tokens.length)}\nlimits:\n  - per: email\n    rate: 999999999/60\n`,
    );
    const withLimit = await startGateway({ GATEWAY_POLICY_FILE: limitedFile });
    // The architecture's floor: node:http + undici relaying to the same upstream, nothing else.
    const bareRelay = await startGateway({}, BARE_RELAY);

    const targets: Target[] = [
      { name: 'direct (upstream)', url: upstreamUrl, proxy: undefined, runs: [] },
      { name: 'through the gateway', url: gateway.url, proxy: gateway.child, runs: [] },
      { name: 'gateway + 50-rule policy', url: withPolicy.url, proxy: withPolicy.child, runs: [] },
      {
        name: 'gateway, DPoP (ES256 proofs)',
        url: gateway.url,
        proxy: gateway.child,
        runs: [],
        dpop: { htu: `${gateway.url}/${SERVICE}/mcp`, keys: dpopKeys },
      },
      {
        name: 'upstream connection (cached)',
        url: connected.url,
        proxy: connected.child,
        runs: [],
      },
      { name: 'gateway, tracing 100 %', url: traced.url, proxy: traced.child, runs: [] },
      { name: 'policy + never-hit limit', url: withLimit.url, proxy: withLimit.child, runs: [] },
      { name: 'bare relay (node:http + undici)', url: bareRelay.url, proxy: bareRelay.child, runs: [] },
    ];
    // The references, when haproxy is installed (make bench-gateway installs it): HAProxy verifying RS256 in C
    // (the issue's), and HAProxy doing the gateway's whole job. Each its own process, idle while not measured.
    const haproxyBin = findHaproxy(config.haproxy);
    const references: Array<{ label: string; target: Target }> = [];
    if (haproxyBin) {
      for (const [job, label] of [
        ['rs256', 'RS256 only'],
        ['gateway', 'same job'],
      ] as const) {
        const port = await freePort();
        const proxy = await startHaproxy(
          haproxyBin.bin,
          0,
          {
            dir: scratch,
            port,
            upstream: new URL(upstreamUrl),
            issuer,
            publicKey,
            identitySecret: IDENTITY_SECRET,
          },
          job,
        );
        children.push(proxy);
        const target = {
          name: `HAProxy ${haproxyBin.version}, ${label}`,
          url: `http://127.0.0.1:${port}`,
          proxy,
          runs: [],
        };
        targets.push(target);
        references.push({ label, target });
      }
    }

    // A baseline build (BENCH_GATEWAY_BASELINE) beside this one, with and without the same policy.
    const baselines: Target[] = [];
    if (config.baseline) {
      const base = await startGateway({}, config.baseline);
      const basePolicy = await startGateway({ GATEWAY_POLICY_FILE: policyFile }, config.baseline);
      baselines.push(
        { name: 'baseline: gateway', url: base.url, proxy: base.child, runs: [] },
        { name: 'baseline: + 50-rule policy', url: basePolicy.url, proxy: basePolicy.child, runs: [] },
      );
      targets.push(...baselines);
    }

    // One request per token first through each proxy (key-set fetch, token cache), then a short warm-up of
    // each target (JIT).
    for (const t of targets.slice(1)) if (!t.dpop) await firstRequests(t.url, tokens);
    /** One ES256 verification's CPU, measured on the gateway's core between the load runs (once a round). */
    const es256Runs: number[] = [];
    const es256BareRuns: number[] = [];
    const measureEs256 = async () => {
      const { us, bareUs } = await firstJsonLine<{ us: number; bareUs: number }>(
        spawnNode(0, [ES256_VERIFY]),
      );
      es256Runs.push(us);
      es256BareRuns.push(bareUs);
    };
    const warm = Math.min(3, duration);
    const tokensOf = (t: Target) => (t.dpop ? boundTokens : tokens);
    for (const t of targets)
      await load({ url: t.url, tokens: tokensOf(t), connections, duration: warm, dpop: t.dpop });

    // Alternate the targets in short rounds: the machine is shared (a VM), and a slow patch that lands in one
    // long run would otherwise be read as a proxy's cost or its saving.
    const slice = duration / rounds;
    const perf = config.perf !== undefined && perfUsable(config.perf) ? config.perf : undefined;
    const coreTime = new Map(targets.map((t) => [t, emptyTargetCoreTime()]));
    for (let i = 0; i < rounds; i++) {
      for (const t of targets) {
        t.runs.push(
          await measure(
            { url: t.url, tokens: tokensOf(t), connections, duration: slice, dpop: t.dpop },
            [upstream, t.proxy],
            perf === undefined ? undefined : { perf, dir: scratch, into: coreTime.get(t)! },
          ),
        );
      }
      await measureEs256();
    }
    const [direct, through, policed, dpop, upstreamAuth, tracedRun, limitedRun, bare] = targets.map((t) =>
      combine(t.runs),
    ) as [Measured, Measured, Measured, Measured, Measured, Measured, Measured, Measured];
    const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
    const es256 = median(es256Runs);
    const dpopAdded = dpop.cpuUsPerRequest[1]! - through.cpuUsPerRequest[1]!;
    const sameJob = references.find((r) => r.label === 'same job');
    /** Per-round ratios of target `a` to target `b`. */
    const roundsOf = (a: Target, b: Target) =>
      a.runs.map((r, i) => `${(r.requestsPerSecond / b.runs[i]!.requestsPerSecond).toFixed(3)}×`).join(', ');
    const perRound = (t: Target) =>
      t.runs
        .map((r, i) => `${(r.requestsPerSecond / targets[0]!.runs[i]!.requestsPerSecond).toFixed(3)}×`)
        .join(', ');

    const ratio = through.requestsPerSecond / direct.requestsPerSecond;
    const cell = (v: number | undefined, width: number) =>
      (v === undefined || Number.isNaN(v) ? '—' : v.toFixed(1)).padStart(width);
    const row = (name: string, r: Measured) =>
      `| ${name.padEnd(32)} | ${r.requestsPerSecond.toFixed(0).padStart(8)} | ${r.p50.toFixed(2).padStart(7)} | ${r.p99
        .toFixed(2)
        .padStart(7)} | ${cell(r.cpuUsPerRequest[0], 12)} | ${cell(r.cpuUsPerRequest[1], 9)} | ${String(
        r.non2xx + r.errors,
      ).padStart(6)} |`;
    const cpu = cpus()[0]?.model ?? 'unknown CPU';
    const lines = [
      '',
      `gateway benchmark: POST /${SERVICE}/mcp tools/call (${Buffer.byteLength(REQUEST_BODY)} B) → ${Buffer.byteLength(
        RESPONSE_BODY,
      )} B result; ${connections} connections, ${tokens.length} tokens, ${duration} s per target in ${rounds} alternating rounds, load generator: ${
        config.loadgen === 'autocannon' ? 'autocannon' : 'raw sockets'
      }`,
      `machine: ${cpu}, ${availableParallelism()} cores, Node ${process.versions.node}; ${
        PIN
          ? 'upstream + proxy on core 0, load generator on core 1 (taskset)'
          : 'NOT pinned (taskset or a second core missing)'
      }`,
      '',
      '| target                           |    req/s | p50 ms  | p99 ms  | upstream CPU | proxy CPU | errors |',
      '|                                  |          |         |         |   µs/request | µs/request|        |',
      '|----------------------------------|----------|---------|---------|--------------|-----------|--------|',
      ...targets.map((t) => row(t.name, combine(t.runs))),
      '',
      `ratio gateway / direct: ${ratio.toFixed(3)}× (target ≥ 0.25×); per round: ${perRound(targets[1]!)}`,
      `ratio gateway with the 50-rule policy / without: ${(policed.requestsPerSecond / through.requestsPerSecond).toFixed(3)}× (target ≥ 0.95×); per round: ${targets[2]!.runs
        .map((r, i) => `${(r.requestsPerSecond / targets[1]!.runs[i]!.requestsPerSecond).toFixed(3)}×`)
        .join(', ')}`,
      // CPU per request moves less with the shared machine's load than req/s: the policy's own cost.
      `policy CPU: (upstream + gateway) µs/request without / with the policy = ${(
        (through.cpuUsPerRequest[0]! + through.cpuUsPerRequest[1]!) /
          (policed.cpuUsPerRequest[0]! + policed.cpuUsPerRequest[1]!)
      ).toFixed(
        3,
      )}× (gateway alone: +${(policed.cpuUsPerRequest[1]! - through.cpuUsPerRequest[1]!).toFixed(1)} µs/request)`,
      `ratio DPoP / Bearer (same gateway, same run): ${(dpop.requestsPerSecond / through.requestsPerSecond).toFixed(3)}×; per round: ${targets[3]!.runs
        .map((r, i) => `${(r.requestsPerSecond / targets[1]!.runs[i]!.requestsPerSecond).toFixed(3)}×`)
        .join(
          ', ',
        )}; gateway CPU per DPoP request +${(dpop.cpuUsPerRequest[1]! - through.cpuUsPerRequest[1]!).toFixed(1)} µs over Bearer (proof verify + replay SET NX EX; split: node bench/dpop-cost.ts)`,
      `ratio a service with an upstream connection (token cached) / the same service without one: ${(upstreamAuth.requestsPerSecond / through.requestsPerSecond).toFixed(3)}× (target ≥ 0.9×); per round: ${targets[4]!.runs
        .map((r, i) => `${(r.requestsPerSecond / targets[1]!.runs[i]!.requestsPerSecond).toFixed(3)}×`)
        .join(
          ', ',
        )}; gateway CPU +${(upstreamAuth.cpuUsPerRequest[1]! - through.cpuUsPerRequest[1]!).toFixed(1)} µs/request; exchanges: ${tokenEndpoint.exchanges()} (one per user, before the measured runs)`,
      `ratio tracing at 100 % sampling (OTLP/HTTP export) / without: ${(tracedRun.requestsPerSecond / through.requestsPerSecond).toFixed(3)}× (target ≥ 0.75×); per round: ${roundsOf(targets[5]!, targets[1]!)}; gateway CPU +${(tracedRun.cpuUsPerRequest[1]! - through.cpuUsPerRequest[1]!).toFixed(1)} µs/request`,
      `ratio never-triggering rate limit (with the 50-rule policy) / the policy alone: ${(limitedRun.requestsPerSecond / policed.requestsPerSecond).toFixed(3)}× (target ≥ 0.95×); per round: ${roundsOf(targets[6]!, targets[2]!)}; gateway CPU +${(limitedRun.cpuUsPerRequest[1]! - policed.cpuUsPerRequest[1]!).toFixed(1)} µs/request`,
      // CPU time per request moves less with the rest of the machine's load than req/s does; if core 0 were
      // the only limit, the ratio would be the upstream's direct cost over both processes' cost through the
      // gateway.
      `CPU-bound estimate: direct upstream CPU / (upstream + gateway CPU through the gateway) = ${(
        direct.cpuUsPerRequest[0]! / (through.cpuUsPerRequest[0]! + through.cpuUsPerRequest[1]!)
      ).toFixed(3)}×`,
      ...references.flatMap(({ label, target }) => {
        const r = combine(target.runs);
        return [
          `HAProxy (${label}) / direct: ${(r.requestsPerSecond / direct.requestsPerSecond).toFixed(3)}×; per round: ${perRound(
            target,
          )}${
            label === 'same job'
              ? ''
              : `; the gateway's rate over it: ${(through.requestsPerSecond / r.requestsPerSecond).toFixed(3)}×`
          }`,
        ];
      }),
      ...(baselines.length === 2
        ? (() => {
            const [b, bp] = baselines.map((t) => combine(t.runs)) as [Measured, Measured];
            return [
              `baseline (${config.baseline}): gateway CPU ${b.cpuUsPerRequest[1]!.toFixed(1)} µs/request, with the policy ${bp.cpuUsPerRequest[1]!.toFixed(1)} (+${(bp.cpuUsPerRequest[1]! - b.cpuUsPerRequest[1]!).toFixed(1)}); this build: ${through.cpuUsPerRequest[1]!.toFixed(1)}, with the policy ${policed.cpuUsPerRequest[1]!.toFixed(1)} (+${(policed.cpuUsPerRequest[1]! - through.cpuUsPerRequest[1]!).toFixed(1)})`,
              `baseline req/s: policy / without ${(bp.requestsPerSecond / b.requestsPerSecond).toFixed(3)}×; this build / baseline: gateway ${(through.requestsPerSecond / b.requestsPerSecond).toFixed(3)}× (telemetry unset: target unchanged within the run's noise; per round: ${roundsOf(targets[1]!, baselines[0]!)}), with the policy ${(policed.requestsPerSecond / bp.requestsPerSecond).toFixed(3)}×`,
            ];
          })()
        : []),
      ...(perf !== undefined
        ? [...SPLIT_HEADER, ...targets.map((t) => splitRow(t.name, coreTime.get(t)!))]
        : config.perf !== undefined
          ? ['', `BENCH_PERF: ${config.perf} cannot record CPU 0 here (install linux-perf; run as root)`]
          : []),
      ...(references.length > 0
        ? []
        : [
            config.haproxy === 'off'
              ? 'HAProxy references not measured (BENCH_HAPROXY=off)'
              : 'HAProxy references not measured: no haproxy binary (apt-get install haproxy, or BENCH_HAPROXY=<path>)',
          ]),
      '',
      // The lines the targets are read from, each printed once (issue: close to the limit).
      `ES256 verify (node:crypto, on the gateway's core): ${es256.toFixed(1)} µs CPU as a JWS verifier calls it ({ key, dsaEncoding: 'ieee-p1363' }; median of ${es256Runs.length}: ${es256Runs.map((v) => v.toFixed(1)).join(', ')}); with a bare KeyObject and a DER signature ${median(es256BareRuns).toFixed(1)} µs (DPoP added / that: ${(dpopAdded / median(es256BareRuns)).toFixed(3)})`,
      `DPoP added CPU / ES256 verify: ${(dpopAdded / es256).toFixed(3)} (target ≤ 2; DPoP adds ${dpopAdded.toFixed(1)} µs of gateway CPU per request over Bearer)`,
      `gateway / bare relay: ${(through.requestsPerSecond / bare.requestsPerSecond).toFixed(3)} (target ≥ 0.80; per round: ${roundsOf(targets[1]!, targets[7]!)}; gateway CPU ${through.cpuUsPerRequest[1]!.toFixed(1)} µs/request, the relay's ${bare.cpuUsPerRequest[1]!.toFixed(1)})`,
      sameJob
        ? `gateway / HAProxy (same job): ${(through.requestsPerSecond / combine(sameJob.target.runs).requestsPerSecond).toFixed(3)} (target ≥ 1.0; per round: ${roundsOf(targets[1]!, sameJob.target)})`
        : 'gateway / HAProxy (same job): not measured (no haproxy)',
      '',
    ];
    process.stdout.write(lines.join('\n'));
    if (targets.some((t) => t.runs.some((r) => r.non2xx + r.errors > 0))) {
      process.stdout.write('some requests failed: the figures above are not valid\n');
      process.exitCode = 1;
    }
  } finally {
    cleanup();
  }
}

await orchestrate();
