// `make bench-gateway`: the gateway's cost over talking to the tool server directly.
//
// Shape (issue: gateway benchmark): an MCP `tools/call` POST of ~300 bytes to a minimal node:http upstream that
// answers a fixed ~500-byte JSON-RPC result; 50 connections; 50 distinct valid RS256 tokens (rotating, so the
// verified-token cache holds 50 entries and revocation is checked on every request); real Redis. The upstream
// and the gateway are pinned to core 0, the load generator to core 1, and the same load is run
// first straight at the upstream, then through the gateway.
//
//   node bench/gateway-proxy.ts                 orchestrates and prints the table
//   node bench/gateway-proxy.ts upstream        (internal) the upstream
//   node bench/gateway-proxy.ts load <json>     (internal) one load-generator run, result as JSON on stdout
//
// BENCH_DURATION (seconds of load per target, default 12), BENCH_ROUNDS (default 3: direct and gateway runs
// alternate, so a change in the shared machine's load hits both sides alike), BENCH_CONNECTIONS (default 50),
// REDIS_URL (default the local one), BENCH_LOADGEN (`raw`, the default, or `autocannon` — a heavier generator
// saturates its own core sooner and so caps the direct run lower, which raises the ratio; docs/gateway.md
// reports both), BENCH_GATEWAY_NODE_OPTIONS (NODE_OPTIONS for the gateway process, e.g. --cpu-prof).
// All are read by bench/config.ts.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { availableParallelism, cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { exportJWK, SignJWT } from 'jose';
import { processEnv } from '../cli/config.ts';
import { loadGatewayBenchConfig } from './config.ts';

const config = loadGatewayBenchConfig(processEnv());

const SELF = fileURLToPath(import.meta.url);
const PLATFORM_BIN = fileURLToPath(new URL('../bin/platform.js', import.meta.url));
const SERVICE = 'bench';
const AUDIENCE = 'https://platform.bench/api';

// ~300 bytes: a realistic tools/call.
const REQUEST_BODY = JSON.stringify({
  jsonrpc: '2.0',
  id: 7,
  method: 'tools/call',
  params: {
    name: 'propose_deal_closure',
    arguments: {
      deal_id: 'D-1042',
      metrics: [{ name: 'ebitda', value: 12.5, source_file: 'q3-financials.xlsx', location: 'Sheet1!B7' }],
      citations: ['sha256:9f2c4e1d7a'],
      idempotency_key: '2b0c7f0e-6f0d-4c53-9d8a-1f5b2c3d4e5f',
    },
  },
});

// ~500 bytes: a fixed JSON-RPC result.
const RESPONSE_BODY = JSON.stringify({
  jsonrpc: '2.0',
  id: 7,
  result: {
    content: [
      {
        type: 'text',
        text: JSON.stringify({
          artifact_id: 'a7f3c2e1-5b4d-4e8f-9a1b-2c3d4e5f6a7b',
          was_inserted: true,
          conflicts: [],
          citations: { durable: 1, fragile: 0 },
          schema_version: 1,
          skill: 'manual',
        }),
      },
    ],
    structuredContent: {
      artifact_id: 'a7f3c2e1-5b4d-4e8f-9a1b-2c3d4e5f6a7b',
      was_inserted: true,
      conflicts: [],
      citations: { durable: 1, fragile: 0 },
      schema_version: 1,
    },
    isError: false,
  },
});

interface LoadSpec {
  url: string;
  tokens: string[];
  connections: number;
  duration: number;
}

interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
}

async function runUpstream(): Promise<void> {
  const body = Buffer.from(RESPONSE_BODY);
  const server = createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
  });
}

/**
 * The load generator: keep-alive HTTP/1.1 over raw sockets with the 50 requests prebuilt, one request in flight
 * per connection, latency of every response recorded in microseconds. (autocannon records whole milliseconds,
 * which reads as p50 = 0 for a sub-millisecond upstream; a plain client also keeps the generator's own cost
 * low, so "direct" measures the upstream rather than the generator.)
 */
async function runAutocannon(spec: LoadSpec): Promise<void> {
  // autocannon ships no type declarations; the specifier is a variable so the import is typed by the cast below.
  const specifier = 'autocannon';
  const { default: autocannon } = (await import(specifier)) as unknown as {
    default: (opts: Record<string, unknown>) => Promise<{
      requests: { average: number; total: number };
      latency: { p50: number; p99: number };
      non2xx: number;
      errors: number;
      timeouts: number;
    }>;
  };
  // Each connection walks the same list of prebuilt requests, one token each.
  const requests = spec.tokens.map((t) => ({
    method: 'POST',
    path: `/${SERVICE}/mcp`,
    headers: {
      authorization: `Bearer ${t}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: REQUEST_BODY,
  }));
  const r = await autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: spec.duration,
    requests,
  });
  // autocannon's latencies are whole milliseconds.
  const result: LoadResult = {
    requestsPerSecond: r.requests.total / spec.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

async function runLoad(spec: LoadSpec): Promise<void> {
  const target = new URL(spec.url);
  const body = Buffer.from(REQUEST_BODY);
  const requests = spec.tokens.map((t) =>
    Buffer.concat([
      Buffer.from(
        `POST /${SERVICE}/mcp HTTP/1.1\r\nHost: ${target.host}\r\nAuthorization: Bearer ${t}\r\n` +
          'Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n' +
          `Content-Length: ${body.length}\r\n\r\n`,
      ),
      body,
    ]),
  );
  let samples = new Float64Array(1 << 20);
  let count = 0;
  let non2xx = 0;
  let errors = 0;
  let running = true;
  const started = performance.now();
  const finished: Array<Promise<void>> = [];

  for (let c = 0; c < spec.connections; c++) {
    finished.push(
      new Promise<void>((resolve) => {
        const socket = connect({ host: target.hostname, port: Number(target.port), noDelay: true });
        let next = c;
        let sentAt = 0;
        let buf: Buffer = Buffer.alloc(0);
        const send = () => {
          if (!running) {
            socket.end();
            return;
          }
          sentAt = performance.now();
          socket.write(requests[next % requests.length]!);
          next += 1;
        };
        socket.on('connect', send);
        socket.on('data', (chunk: Buffer) => {
          buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
          for (;;) {
            const end = buf.indexOf('\r\n\r\n');
            if (end < 0) return;
            const head = buf.toString('latin1', 0, end);
            const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
            if (!m) {
              // Every response in this shape has a Content-Length; anything else is counted as an error.
              errors += 1;
              socket.destroy();
              return;
            }
            const total = end + 4 + Number(m[1]);
            if (buf.length < total) return;
            const status = Number(head.slice(9, 12));
            if (status < 200 || status > 299) non2xx += 1;
            if (count === samples.length) {
              const bigger = new Float64Array(samples.length * 2);
              bigger.set(samples);
              samples = bigger;
            }
            samples[count++] = (performance.now() - sentAt) * 1000;
            buf = buf.subarray(total);
            send();
          }
        });
        socket.on('error', () => {
          errors += 1;
        });
        socket.on('close', () => resolve());
      }),
    );
  }
  await new Promise((r) => setTimeout(r, spec.duration * 1000));
  running = false;
  const elapsed = (performance.now() - started) / 1000;
  await Promise.race([Promise.all(finished), new Promise((r) => setTimeout(r, 2000))]);
  const sorted = samples.subarray(0, count).sort();
  const pct = (p: number) =>
    count === 0 ? 0 : sorted[Math.min(count - 1, Math.floor((p / 100) * count))]! / 1000;
  const result: LoadResult = {
    requestsPerSecond: count / elapsed,
    p50: pct(50),
    p99: pct(99),
    total: count,
    non2xx,
    errors,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------------------------

function hasTaskset(): boolean {
  try {
    execFileSync('taskset', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const PIN = hasTaskset() && availableParallelism() >= 2;

/** Runs `node args…` (pinned to `core` when taskset is available). */
function spawnNode(core: number, args: string[], env: NodeJS.ProcessEnv = config.childEnv): ChildProcess {
  const [cmd, argv] = PIN
    ? ['taskset', ['-c', String(core), process.execPath, ...args]]
    : [process.execPath, args];
  return spawn(cmd as string, argv as string[], { env, stdio: ['ignore', 'pipe', 'pipe'] });
}

function firstJsonLine<T>(
  child: ChildProcess,
  match: (v: Record<string, unknown>) => boolean = () => true,
): Promise<T> {
  return new Promise((resolve, reject) => {
    let buf = '';
    let err = '';
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (const line of buf.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const v = JSON.parse(line) as Record<string, unknown>;
          if (match(v)) return resolve(v as T);
        } catch {
          // partial line
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`child exited (${code}) early:\n${buf}\n${err}`)));
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); undefined elsewhere. */
function cpuSeconds(pid: number | undefined): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat(5), counted after the command name (fields 1–2).
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** One load run, plus the CPU time each watched process spent per request during it. */
async function measure(
  spec: LoadSpec,
  watch: ChildProcess[],
): Promise<LoadResult & { cpuUsPerRequest: number[] }> {
  const before = watch.map((c) => cpuSeconds(c.pid));
  const r = await load(spec);
  const after = watch.map((c) => cpuSeconds(c.pid));
  return {
    ...r,
    cpuUsPerRequest: watch.map((_, i) =>
      before[i] === undefined || after[i] === undefined
        ? Number.NaN
        : ((after[i]! - before[i]!) * 1e6) / r.total,
    ),
  };
}

type Measured = LoadResult & { cpuUsPerRequest: number[] };

/** Several rounds of one target as one: rates and CPU per request over all requests, latencies the median round's. */
function combine(runs: Measured[]): Measured {
  const total = runs.reduce((n, r) => n + r.total, 0);
  const seconds = runs.reduce((n, r) => n + r.total / r.requestsPerSecond, 0);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return {
    requestsPerSecond: total / seconds,
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    total,
    non2xx: runs.reduce((n, r) => n + r.non2xx, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    cpuUsPerRequest: runs[0]!.cpuUsPerRequest.map(
      (_, i) => runs.reduce((n, r) => n + r.cpuUsPerRequest[i]! * r.total, 0) / total,
    ),
  };
}

async function load(spec: LoadSpec): Promise<LoadResult> {
  const child = spawnNode(1, [SELF, 'load', JSON.stringify(spec)]);
  return firstJsonLine<LoadResult>(child);
}

async function orchestrate(): Promise<void> {
  const { duration, connections, redisUrl, rounds } = config;

  // The platform issuer's key set, served from here (one fetch by the gateway; never on the measured path).
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = `bench-${randomUUID()}`;
  const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' }] });
  const keyServer = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(jwks);
  });
  await new Promise<void>((r) => keyServer.listen(0, '127.0.0.1', () => r()));
  const issuer = `http://127.0.0.1:${(keyServer.address() as AddressInfo).port}`;

  const now = Math.floor(Date.now() / 1000);
  const tokens = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      new SignJWT({
        iss: issuer,
        aud: AUDIENCE,
        sub: `bench-user-${i}`,
        email: `bench-${i}@example.com`,
        scope: `openid email mcp:${SERVICE}`,
        client_id: 'platform-cli',
        jti: randomUUID(),
        iat: now,
        exp: now + 3600,
      })
        .setProtectedHeader({ alg: 'RS256', kid, typ: 'at+jwt' })
        .sign(privateKey),
    ),
  );

  const children: ChildProcess[] = [];
  const cleanup = () => {
    for (const c of children) c.kill('SIGTERM');
    keyServer.close();
  };
  process.on('exit', cleanup);
  try {
    const upstream = spawnNode(0, [SELF, 'upstream']);
    children.push(upstream);
    const { port: upstreamPort } = await firstJsonLine<{ port: number }>(upstream);
    const upstreamUrl = `http://127.0.0.1:${upstreamPort}`;

    const gatewayPort = await freePort();
    const gateway = spawnNode(0, [PLATFORM_BIN, 'gateway'], {
      PATH: config.childEnv.PATH,
      GATEWAY_PORT: String(gatewayPort),
      PUBLIC_BASE_URL: `http://127.0.0.1:${gatewayPort}`,
      GATEWAY_SERVICES: SERVICE,
      BENCH_MCP_UPSTREAM: upstreamUrl,
      PLATFORM_ISSUER: issuer,
      PLATFORM_JWKS_URL: `${issuer}/keys`,
      PLATFORM_AUDIENCE: AUDIENCE,
      REDIS_URL: redisUrl,
      GATEWAY_IDENTITY_SECRET: 'bench-identity-secret-0123456789abcdef0123',
      LOG_LEVEL: 'info',
      // e.g. BENCH_GATEWAY_NODE_OPTIONS=--cpu-prof to profile the gateway under this load.
      NODE_OPTIONS: config.gatewayNodeOptions,
    });
    children.push(gateway);
    await firstJsonLine(gateway, (l) => l.msg === 'gateway listening');
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;

    // One request per token first (key-set fetch, token cache), then a short warm-up of each target (JIT).
    for (const t of tokens) {
      const r = await fetch(`${gatewayUrl}/${SERVICE}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
        body: REQUEST_BODY,
      });
      if (r.status !== 200) throw new Error(`gateway answered ${r.status}: ${await r.text()}`);
      await r.arrayBuffer();
    }
    const warm = Math.min(3, duration);
    await load({ url: upstreamUrl, tokens, connections, duration: warm });
    await load({ url: gatewayUrl, tokens, connections, duration: warm });

    // Alternate the two targets in short rounds: the machine is shared (a VM), and a slow patch that lands in
    // one long run would otherwise be read as the gateway's cost or its saving.
    const slice = duration / rounds;
    const directRuns: Measured[] = [];
    const throughRuns: Measured[] = [];
    for (let i = 0; i < rounds; i++) {
      directRuns.push(
        await measure({ url: upstreamUrl, tokens, connections, duration: slice }, [upstream, gateway]),
      );
      throughRuns.push(
        await measure({ url: gatewayUrl, tokens, connections, duration: slice }, [upstream, gateway]),
      );
    }
    const direct = combine(directRuns);
    const through = combine(throughRuns);
    const roundRatios = throughRuns.map((t, i) => t.requestsPerSecond / directRuns[i]!.requestsPerSecond);

    const ratio = through.requestsPerSecond / direct.requestsPerSecond;
    const row = (name: string, r: LoadResult & { cpuUsPerRequest: number[] }) =>
      `| ${name.padEnd(20)} | ${r.requestsPerSecond.toFixed(0).padStart(8)} | ${r.p50.toFixed(2).padStart(7)} | ${r.p99
        .toFixed(2)
        .padStart(7)} | ${r.cpuUsPerRequest[0]!.toFixed(1).padStart(12)} | ${r.cpuUsPerRequest[1]!.toFixed(
        1,
      ).padStart(11)} | ${String(r.non2xx + r.errors).padStart(6)} |`;
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
          ? 'upstream + gateway on core 0, load generator on core 1 (taskset)'
          : 'NOT pinned (taskset or a second core missing)'
      }`,
      '',
      '| target               |    req/s | p50 ms  | p99 ms  | upstream CPU | gateway CPU | errors |',
      '|                      |          |         |         |   µs/request |  µs/request |        |',
      '|----------------------|----------|---------|---------|--------------|-------------|--------|',
      row('direct (upstream)', direct),
      row('through the gateway', through),
      '',
      `ratio gateway / direct: ${ratio.toFixed(3)}× (target ≥ 0.25×); per round: ${roundRatios
        .map((r) => `${r.toFixed(3)}×`)
        .join(', ')}`,
      // CPU time per request moves less with the rest of the machine's load than req/s does; if core 0 were
      // the only limit, the ratio would be the upstream's direct cost over both processes' cost through the
      // gateway.
      `CPU-bound estimate: direct upstream CPU / (upstream + gateway CPU through the gateway) = ${(
        direct.cpuUsPerRequest[0]! / (through.cpuUsPerRequest[0]! + through.cpuUsPerRequest[1]!)
      ).toFixed(3)}×`,
      '',
    ];
    process.stdout.write(lines.join('\n'));
    if (through.non2xx + through.errors > 0 || direct.non2xx + direct.errors > 0) {
      process.stdout.write('some requests failed: the figures above are not valid\n');
      process.exitCode = 1;
    }
  } finally {
    cleanup();
  }
}

const role = process.argv[2];
if (role === 'upstream') await runUpstream();
else if (role === 'load') {
  const spec = JSON.parse(process.argv[3]!) as LoadSpec;
  if (config.loadgen === 'autocannon') await runAutocannon(spec);
  else await runLoad(spec);
} else await orchestrate();
