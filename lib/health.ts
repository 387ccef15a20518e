import type { ServerResponse } from 'node:http';

// Liveness and readiness, alike on every server (IdP, gateway, tool servers, `platform dev`):
//   GET /health/live   200 {"status":"live"}: the process answers; nothing else is asked.
//   GET /health/ready  200 {"status":"ready","checks":{…}} when every dependency answers, else
//                      503 {"status":"not_ready","missing":["postgres",…],"checks":{…}}.
// An orchestrator restarts a process whose liveness fails and takes one out of rotation whose readiness
// fails: a database outage must fail readiness only, or every replica would be restarted at once.

/** A dependency the process needs to serve: `postgres`, `redis` or `jwks`. */
export type Dependency = 'postgres' | 'redis' | 'jwks';

/** Answers whether the dependency is usable now; a rejection or a time-out counts as no. */
export type ReadinessCheck = () => boolean | Promise<boolean>;

export type ReadinessChecks = Partial<Record<Dependency, ReadinessCheck>>;

/** How long one check may take before the dependency counts as missing (a probe's own timeout is ~1–5 s). */
const CHECK_TIMEOUT_MS = 1500;

export interface Readiness {
  ready: boolean;
  missing: Dependency[];
  checks: Partial<Record<Dependency, 'ok' | 'down'>>;
}

/** Runs every check at once, each bounded by CHECK_TIMEOUT_MS. */
export async function checkReadiness(checks: ReadinessChecks): Promise<Readiness> {
  const names = Object.keys(checks) as Dependency[];
  const results = await Promise.all(names.map((name) => bounded(checks[name]!)));
  const out: Readiness = { ready: true, missing: [], checks: {} };
  names.forEach((name, i) => {
    out.checks[name] = results[i] ? 'ok' : 'down';
    if (!results[i]) {
      out.ready = false;
      out.missing.push(name);
    }
  });
  return out;
}

async function bounded(check: ReadinessCheck): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      Promise.resolve().then(check),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), CHECK_TIMEOUT_MS);
      }),
    ]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

export const LIVE_PATH = '/health/live';
export const READY_PATH = '/health/ready';
const LIVE_BODY = '{"status":"live"}';

function send(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  });
  res.end(body);
}

/** `/health/live`: the process answers. */
export function sendLive(res: ServerResponse): void {
  send(res, 200, LIVE_BODY);
}

/** `/health/ready`: 200 or 503 with the dependencies that did not answer named in `missing`. */
export async function sendReady(res: ServerResponse, checks: ReadinessChecks): Promise<void> {
  const r = await checkReadiness(checks);
  const body = r.ready
    ? { status: 'ready', checks: r.checks }
    : { status: 'not_ready', missing: r.missing, checks: r.checks };
  send(res, r.ready ? 200 : 503, JSON.stringify(body));
}

/** Postgres answers a trivial query (through the process's own pool, so a full pool counts as not ready). */
export function postgresCheck(pool: { query(sql: string): Promise<unknown> }): ReadinessCheck {
  return async () => {
    await pool.query('SELECT 1');
    return true;
  };
}
