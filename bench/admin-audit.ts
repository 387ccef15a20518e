// make bench-audit: server time of the admin API's audit pages at 100 000 audit rows (issue: < 50 ms).
//
// Shape: its own database seeded with 100 000 rows over 30 days (94 000 issuances, 5 000 refusals, 1 000 admin
// actions; 2 000 users, 50 clients, 5 services: bench/lib/audit-seed.ts), the real `platform idp`, an
// administrator's token, then N sequential requests per page. Server time is the IdP's own measure, from the
// `Server-Timing: app;dur=<ms>` header of each answer (authentication, query, admin audit row).
import { spawn } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { processEnv } from '../cli/config.ts';
import { loadIdpBenchConfig } from './config.ts';
import { SEED_AUDIT } from './lib/audit-seed.ts';
import { createScratchDatabase } from './lib/scratch-database.ts';

const N = 50;
const TARGET_MS = 50;
const config = loadIdpBenchConfig(processEnv());
const PORT = 4900 + Math.floor(Math.random() * 200);
const ISSUER = `http://127.0.0.1:${PORT}`;
const ADMIN = 'bench-admin@example.com';
const root = fileURLToPath(new URL('..', import.meta.url));
const started = Date.now();

async function setupDatabase() {
  const db = await createScratchDatabase(config.adminDatabaseUrl, 'bench_audit');
  for (const sql of SEED_AUDIT) await db.pool.query(sql);
  const { rows } = await db.pool.query<{ id: number }>(
    'INSERT INTO users (name, email) VALUES ($1, $2) RETURNING id',
    ['admin', ADMIN],
  );
  const session = randomBytes(24).toString('hex');
  await db.pool.query(
    `INSERT INTO sessions ("userId", expires, "sessionToken") VALUES ($1, now() + interval '1 hour', $2)`,
    [rows[0]!.id, session],
  );
  return { ...db, session };
}

async function startIdp(databaseUrl: string) {
  const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;
  const child = spawn(process.execPath, [`${root}bin/platform.js`, 'idp'], {
    env: {
      PATH: config.path,
      IDP_PORT: String(PORT),
      PLATFORM_OIDC_ISSUER: ISSUER,
      PLATFORM_OIDC_PRIVATE_KEY: key,
      PLATFORM_AUDIENCE: 'https://platform.bench/api',
      PLATFORM_ADMIN_EMAILS: ADMIN,
      DATABASE_URL: databaseUrl,
      REDIS_URL: config.redisUrl,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error('idp exited during start-up');
    try {
      if ((await fetch(`${ISSUER}/health`)).ok) break;
    } catch {
      if (i > 200) throw new Error('idp did not start');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return child;
}

/** An administrator's access token with platform:admin, through the authorization code flow. */
async function adminToken(session: string): Promise<string> {
  const verifier = randomBytes(32).toString('base64url');
  const redirectUri = 'http://127.0.0.1:9/callback';
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: 'platform-cli',
    redirect_uri: redirectUri,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    state: 's',
    scope: 'openid email platform:admin',
  });
  const a = await fetch(`${ISSUER}/oauth/authorize?${q}`, {
    redirect: 'manual',
    headers: { cookie: `authjs.session-token=${session}` },
  });
  const code = new URL(a.headers.get('location')!).searchParams.get('code')!;
  const t = await fetch(`${ISSUER}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      redirect_uri: redirectUri,
      client_id: 'platform-cli',
    }),
  });
  return ((await t.json()) as { access_token: string }).access_token;
}

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;

async function measure(token: string, path: string): Promise<{ median: number; p95: number; rows: number }> {
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < N + 5; i++) {
    const res = await fetch(`${ISSUER}${path}`, { headers: { authorization: `Bearer ${token}` } });
    const body = (await res.json()) as { items?: unknown[]; hours?: unknown[] };
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
    const dur = /app;dur=([\d.]+)/.exec(res.headers.get('server-timing') ?? '');
    if (!dur) throw new Error(`${path}: no Server-Timing header`);
    rows = body.items?.length ?? body.hours?.length ?? 0;
    if (i >= 5) times.push(Number(dur[1])); // the first five warm the connection pool and the plan cache
  }
  times.sort((a, b) => a - b);
  return { median: quantile(times, 0.5), p95: quantile(times, 0.95), rows };
}

const db = await setupDatabase();
const seeded = Date.now();
const idp = await startIdp(db.url);
let failed = false;
try {
  const token = await adminToken(db.session);
  const since = new Date(Date.now() - 7 * 86400_000).toISOString();
  const pages: Array<[string, string]> = [
    ['first page (50 rows)', '/admin/api/audit'],
    ['by email', '/admin/api/audit?email=user42%40example.com'],
    ['client + service + since', `/admin/api/audit?client_id=client-7&service=crm&since=${since}`],
    ['per-hour chart (48 h)', '/admin/api/audit/per-hour?hours=48'],
  ];
  console.log(
    `bench-audit: 100 000 audit rows seeded in ${((seeded - started) / 1000).toFixed(1)} s; N=${N} requests per page`,
  );
  console.log(
    `${'page'.padEnd(28)}${'rows'.padStart(6)}${'median ms'.padStart(12)}${'p95 ms'.padStart(10)}   target < ${TARGET_MS} ms (p95)`,
  );
  for (const [name, path] of pages) {
    const r = await measure(token, path);
    const pass = r.p95 < TARGET_MS;
    failed ||= !pass;
    console.log(
      `${name.padEnd(28)}${String(r.rows).padStart(6)}${r.median.toFixed(2).padStart(12)}${r.p95.toFixed(2).padStart(10)}   ${pass ? 'PASS' : 'FAIL'}`,
    );
  }
} finally {
  idp.kill('SIGTERM');
  await new Promise((r) => idp.once('exit', r));
  await db.drop();
}
console.log(`bench-audit: ${failed ? 'FAIL' : 'PASS'} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exitCode = failed ? 1 : 0;
