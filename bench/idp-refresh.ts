// make bench-idp: refresh-grant throughput of `platform idp`, beside the bare node:crypto RS256 sign rate
// measured in the same run, reported as a ratio (issue: target >= 0.35 x the sign rate), and the IdP's CPU per grant
// beside one signature's CPU (steadier than the rates on a shared machine).
//
// Shape: 20 clients, each rotating its own refresh-token chain as fast as it can; scope includes openid,
// so every grant signs an access token AND an id_token and appends its audit row. Postgres on this machine.
// The IdP is pinned to CPU 0 and the load generator (this process) to CPU 1 with taskset.
// The measured seconds run in rounds (BENCH_ROUNDS): in each, the load pauses while bare signing is measured on
// CPU 0, then grants are measured for as long. Both sides of the ratio come from the same minutes, so a shared
// machine whose speed drifts moves them together (one sign-rate reading at the start let it move the ratio alone).
import { execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Pool } from 'undici';
import { processEnv } from '../cli/config.ts';
import { loadIdpBenchConfig } from './config.ts';
import { cpuSeconds, cpuSecondsBetween, cpuSecondsByName } from './gateway/processes.ts';
import { createScratchDatabase } from './lib/scratch-database.ts';

const CLIENTS = 20;
// Long enough for V8 to finish compiling the grant's path: with 3 s, the measured seconds still carried its
// optimizing compiler (perf: 8.5 % of the IdP's core in TurboFan threads at 12-15 s of the process), work a
// provider that has run for a minute no longer does (docs/performance.md).
const WARMUP_S = 10;
const config = loadIdpBenchConfig(processEnv());
const MEASURE_S = config.seconds;
const ADMIN_URL = config.adminDatabaseUrl;
const REDIS_URL = config.redisUrl;
const PORT = 4700 + Math.floor(Math.random() * 200);
const ISSUER = `http://127.0.0.1:${PORT}`;
const root = fileURLToPath(new URL('..', import.meta.url));

const haveTaskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0 && cpus().length >= 2;
const pinned = (cpu: number, cmd: string, args: string[]) =>
  (haveTaskset ? ['taskset', ['-c', String(cpu), cmd, ...args]] : [cmd, args]) as [string, string[]];

if (haveTaskset) execFileSync('taskset', ['-cp', '1', String(process.pid)], { stdio: 'ignore' });

interface SignRate {
  signsPerSecond: number;
  cpuUsPerSign: number;
}

/** Bare node:crypto signing on CPU 0 for `seconds` (bench/lib/sign-rate.ts), while nothing else runs there. */
async function signRate(seconds: number): Promise<SignRate> {
  const [cmd, args] = pinned(0, process.execPath, [`${root}bench/lib/sign-rate.ts`, String(seconds)]);
  const { stdout } = await promisify(execFile)(cmd, args, { encoding: 'utf8' });
  return JSON.parse(stdout.trim());
}

async function setupDatabase() {
  const db = await createScratchDatabase(ADMIN_URL, 'bench_idp', { poolSize: 4 });
  const { pool } = db;
  const sessions: string[] = [];
  for (let i = 0; i < CLIENTS; i++) {
    const { rows } = await pool.query('INSERT INTO users (name, email) VALUES ($1, $2) RETURNING id', [
      `u${i}`,
      `bench${i}@example.com`,
    ]);
    await pool.query(
      `INSERT INTO accounts ("userId", type, provider, "providerAccountId") VALUES ($1, 'oidc', 'microsoft-entra-id', $2)`,
      [rows[0].id, crypto.randomUUID()],
    );
    const token = crypto.randomUUID();
    await pool.query(
      `INSERT INTO sessions ("userId", expires, "sessionToken") VALUES ($1, now() + interval '1 hour', $2)`,
      [rows[0].id, token],
    );
    sessions.push(token);
  }
  return { ...db, sessions };
}

async function startIdp(databaseUrl: string) {
  const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;
  const [cmd, args] = pinned(0, process.execPath, [config.idpBin ?? `${root}bin/platform.js`, 'idp']);
  const child = spawn(cmd, args, {
    env: {
      PATH: config.path,
      IDP_PORT: String(PORT),
      PLATFORM_OIDC_ISSUER: ISSUER,
      ...(config.keyRotation === 'auto'
        ? {
            PLATFORM_KEY_ROTATION: 'auto',
            PLATFORM_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
            PLATFORM_KEY_PUBLISH_AHEAD: '4s',
            PLATFORM_KEY_LIFETIME: '6s',
          }
        : { PLATFORM_OIDC_PRIVATE_KEY: key }),
      PLATFORM_AUDIENCE: 'https://platform.bench/api',
      DATABASE_URL: databaseUrl,
      REDIS_URL,
      // All the load comes from one address: the token endpoint's per-address limit (600 a minute by default)
      // would refuse it. Raised, not removed: every grant still pays for the limiter's check.
      PLATFORM_RATE_LIMITS: 'token=100000000/1',
      LOG_LEVEL: config.idpLogLevel,
      ...(config.idpNodeOptions ? { NODE_OPTIONS: config.idpNodeOptions } : {}),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child.stdout!.resume();
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  // Ready when /health answers (the log level may hide the "listening" line).
  for (let i = 0; ; i++) {
    if (exited) throw new Error('idp exited during start-up');
    try {
      if ((await fetch(`${ISSUER}/health`)).ok) break;
    } catch {
      if (i > 200) throw new Error('idp did not start');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return child;
}

async function obtainRefreshToken(http: Pool, session: string): Promise<string> {
  const { createHash, randomBytes } = await import('node:crypto');
  const verifier = randomBytes(32).toString('base64url');
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: 'platform-cli',
    redirect_uri: 'http://127.0.0.1:9/callback',
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    state: 's',
    scope: 'openid profile email mcp:platform mcp:mail mcp:deals mcp:calendar mcp:crm',
  });
  const a = await http.request({
    method: 'GET',
    path: `/oauth/authorize?${q}`,
    headers: { cookie: `authjs.session-token=${session}` },
  });
  await a.body.dump();
  const code = new URL(String(a.headers.location)).searchParams.get('code')!;
  const t = await http.request({
    method: 'POST',
    path: '/oauth/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      redirect_uri: 'http://127.0.0.1:9/callback',
      client_id: 'platform-cli',
    }).toString(),
  });
  return ((await t.body.json()) as { refresh_token: string }).refresh_token;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function main() {
  console.log(
    `IdP refresh-grant benchmark — ${cpus()[0]?.model ?? 'cpu'} x${cpus().length}, Node ${process.versions.node}${haveTaskset ? ', IdP on CPU 0, load on CPU 1' : ', no taskset: unpinned'}`,
  );
  const db = await setupDatabase();
  const idp = await startIdp(db.url);
  const http = new Pool(ISSUER, { connections: CLIENTS, pipelining: 1 });
  try {
    const chains = await Promise.all(db.sessions.map((s) => obtainRefreshToken(http, s)));
    let counting = false;
    let grants = 0;
    let errors = 0;
    const latencies: number[] = [];
    let stop = false;
    // The load pauses while bare signing is measured: `gate` holds the workers, `drained` wakes the pause once
    // the last grant in flight has been answered (the IdP is then idle on CPU 0).
    let gate: { wait: Promise<void>; open: () => void } | undefined;
    let inFlight = 0;
    let drained: (() => void) | undefined;
    const worker = async (i: number) => {
      while (!stop) {
        if (gate) {
          await gate.wait;
          continue;
        }
        inFlight++;
        try {
          const t0 = performance.now();
          const res = await http.request({
            method: 'POST',
            path: '/oauth/token',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: `grant_type=refresh_token&client_id=platform-cli&refresh_token=${chains[i]}`,
          });
          const body = (await res.body.json()) as { refresh_token?: string; id_token?: string };
          if (res.statusCode !== 200 || !body.refresh_token || !body.id_token) {
            errors++;
            if (errors > 20) throw new Error(`refresh failed: ${res.statusCode} ${JSON.stringify(body)}`);
            continue;
          }
          chains[i] = body.refresh_token;
          if (counting) {
            grants++;
            latencies.push(performance.now() - t0);
          }
        } finally {
          if (--inFlight === 0) drained?.();
        }
      }
    };
    const pause = async () => {
      let open = () => {};
      gate = { wait: new Promise<void>((r) => (open = r)), open };
      if (inFlight > 0) await new Promise<void>((r) => (drained = r));
      drained = undefined;
    };
    const resume = () => {
      gate?.open();
      gate = undefined;
    };
    const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1000));

    const workers = chains.map((_, i) => worker(i));
    // A worker that fails ends the run at once (not after the remaining rounds).
    const failed = Promise.all(workers).then(() => new Promise<never>(() => {}));
    const during = <T>(p: Promise<T>) => Promise.race([p, failed]);
    await during(sleep(WARMUP_S));

    const slice = MEASURE_S / config.rounds;
    const signs: SignRate[] = [];
    const rounds: Array<{ grants: number; seconds: number }> = [];
    let idpCpu = 0;
    let elapsed = 0;
    const servers0 = { pg: cpuSecondsByName(['postgres']), redis: cpuSecondsByName(['redis-server']) };
    for (let r = 0; r < config.rounds; r++) {
      await during(pause());
      signs.push(await signRate(slice));
      resume();
      const before = grants;
      const cpu0 = cpuSeconds(idp.pid);
      const t0 = performance.now();
      counting = true;
      await during(sleep(slice));
      counting = false;
      const seconds = (performance.now() - t0) / 1000;
      idpCpu += (cpuSeconds(idp.pid) ?? Number.NaN) - (cpu0 ?? Number.NaN);
      elapsed += seconds;
      rounds.push({ grants: grants - before, seconds });
    }
    // Postgres and Redis over the whole measured stretch: they are idle while the load pauses.
    const servers1 = { pg: cpuSecondsByName(['postgres']), redis: cpuSecondsByName(['redis-server']) };
    stop = true;
    resume();
    await Promise.all(workers);
    const audit = await db.pool.query('SELECT count(*)::int AS n FROM platform.issuance_audit');
    const rotated =
      config.keyRotation === 'auto'
        ? (await db.pool.query('SELECT count(*)::int AS n FROM platform.rotating_keys')).rows[0].n
        : undefined;

    const rate = grants / elapsed;
    // The sign rate and one signature's CPU over the same rounds (each slice as long as a grant slice).
    const signsPerSecond = signs.reduce((a, s) => a + s.signsPerSecond, 0) / signs.length;
    const cpuUsPerSign = signs.reduce((a, s) => a + s.cpuUsPerSign, 0) / signs.length;
    // The IdP's CPU per grant (user + system, /proc): steadier than the rate on a shared machine.
    const cpuPerGrant = (idpCpu * 1e6) / grants;
    latencies.sort((a, b) => a - b);
    const ratio = rate / signsPerSecond;
    const perRound = rounds
      .map((r, i) => `${(r.grants / r.seconds / signs[i]!.signsPerSecond).toFixed(3)}×`)
      .join(', ');
    console.log('');
    console.log('| measure                                   | value        |');
    console.log('|-------------------------------------------|--------------|');
    console.log(`| node:crypto RS256 signs/s (1 core)        | ${signsPerSecond.toFixed(0).padStart(12)} |`);
    console.log(`| refresh grants/s (${CLIENTS} chains, openid)      | ${rate.toFixed(0).padStart(12)} |`);
    console.log(
      `| grant latency p50 / p99 (ms)              | ${`${percentile(latencies, 50).toFixed(1)} / ${percentile(latencies, 99).toFixed(1)}`.padStart(12)} |`,
    );
    console.log(`| RS256 sign CPU (µs, bare node:crypto)     | ${cpuUsPerSign.toFixed(0).padStart(12)} |`);
    console.log(`| IdP CPU per grant (µs)                    | ${cpuPerGrant.toFixed(0).padStart(12)} |`);
    console.log(
      `| of which not signing (µs, grant − 2 signs)| ${(cpuPerGrant - 2 * cpuUsPerSign).toFixed(0).padStart(12)} |`,
    );
    // Postgres and Redis on this machine (every process of theirs, /proc): the CPU a grant costs them. It shares
    // the machine's two cores with the IdP and the load generator, so it moves the rate too.
    const serverUs = (k: 'pg' | 'redis') => (cpuSecondsBetween(servers0[k], servers1[k]) * 1e6) / grants;
    console.log(`| Postgres CPU per grant (µs, local)        | ${serverUs('pg').toFixed(0).padStart(12)} |`);
    console.log(
      `| Redis CPU per grant (µs, local)           | ${serverUs('redis').toFixed(0).padStart(12)} |`,
    );
    console.log(`| errors                                    | ${String(errors).padStart(12)} |`);
    console.log(`| audit rows written                        | ${String(audit.rows[0].n).padStart(12)} |`);
    if (rotated !== undefined)
      console.log(`| signing keys created (rotation auto, 6 s) | ${String(rotated).padStart(12)} |`);
    console.log('');
    console.log(
      `ratio: ${ratio.toFixed(3)} x the sign rate (target >= 0.35; certified oidc-provider + Postgres ~ 0.12); per round: ${perRound}`,
    );
    // The same ratio if the IdP's core were the only limit: one signature's CPU over one grant's.
    console.log(
      `CPU-bound ratio: ${(cpuUsPerSign / cpuPerGrant).toFixed(3)} x (sign CPU / IdP CPU per grant; 0.5 is signing alone)`,
    );
  } finally {
    await http.close();
    idp.kill('SIGTERM');
    await new Promise((r) => idp.once('exit', r));
    await db.drop();
  }
}

await main();
