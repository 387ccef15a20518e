import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse } from 'yaml';
import { type ComposeTarget, type Container, interpolate } from '../compose.ts';
import { type CheckId, type CheckRow, fail, pass, skip } from '../result.ts';
import { guarded } from './target.ts';

// The operational checks that need the deployment's containers and files rather than its public URL
// (`platform doctor --compose deploy/compose.yaml`): #1, #6, #7, #8, #9, #10, #15, #16.

/** The log line the tool servers write when their MCP machinery is ready (the SDK v2 successor of #6's line). */
export const SESSION_MANAGER_LINE = 'MCP session manager started';
const PROBE_LINE = 'DB reachable, schema accessible';

async function replicasOf(t: ComposeTarget, id: CheckId, service: string): Promise<Container[] | CheckRow> {
  const cs = await t.containers(service);
  if (cs.length === 0) return fail(id, `no container of service ${service} in project ${t.project}`);
  return cs;
}

const messages = (log: string): Array<Record<string, unknown>> =>
  log
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return [];
      }
    });

/** #1: every container of the service is running and its health check says healthy. */
export function checkHealthy(t: ComposeTarget, service: string): Promise<CheckRow> {
  const id = { ref: '#1', subject: service, name: 'container healthy' };
  return guarded(id, async () => {
    const cs = await replicasOf(t, id, service);
    if (!Array.isArray(cs)) return cs;
    const bad = cs.filter((c) => !c.running || (c.health !== 'healthy' && c.health !== 'none'));
    if (bad.length > 0)
      return fail(id, bad.map((c) => `${c.name} ${c.running ? c.health : 'not running'}`).join('; '));
    return pass(id, cs.map((c) => `${c.name} ${c.health === 'none' ? 'running' : 'healthy'}`).join(', '));
  });
}

/**
 * #6 and #16 from one tool server's boot logs: the probe line (`SELECT 1` before listening) and the MCP line,
 * in every replica.
 */
export function checkBootLogs(t: ComposeTarget, service: string): Promise<CheckRow[]> {
  const six = { ref: '#6', subject: service, name: 'boot log: MCP session manager started' };
  const sixteen = { ref: '#16', subject: service, name: 'startup probe logged before listening' };
  return (async () => {
    let cs: Container[];
    try {
      const r = await replicasOf(t, six, service);
      if (!Array.isArray(r)) return [r, { ...r, ...sixteen }];
      cs = r;
    } catch (err) {
      const why = (err as Error).message;
      return [fail(six, why), fail(sixteen, why)];
    }
    const missing6: string[] = [];
    const missing16: string[] = [];
    for (const c of cs) {
      const lines = messages(await t.logs(c)).map((m) => String(m.msg ?? ''));
      if (!lines.includes(SESSION_MANAGER_LINE)) missing6.push(c.name);
      const probe = lines.indexOf(PROBE_LINE);
      const listening = lines.findIndex((l) => l.endsWith('tool server listening'));
      if (probe === -1 || listening === -1 || probe > listening) missing16.push(c.name);
    }
    return [
      missing6.length === 0
        ? pass(six, `"${SESSION_MANAGER_LINE}" in ${cs.length} replica(s)`)
        : fail(six, `no "${SESSION_MANAGER_LINE}" in ${missing6.join(', ')}`),
      missing16.length === 0
        ? pass(sixteen, `"${PROBE_LINE}" before listening in ${cs.length} replica(s)`)
        : fail(sixteen, `no "${PROBE_LINE}" before "listening" in ${missing16.join(', ')}`),
    ];
  })();
}

/**
 * #7: after an authenticated call, a gateway logged the key-set fetch with HTTP 200. Replicas share the fetched
 * set through Redis, so one replica's line is enough.
 */
export function checkJwksFetch(t: ComposeTarget, authenticatedCallMade: boolean): Promise<CheckRow> {
  const id = { ref: '#7', subject: 'gateway', name: 'JWKS fetch 200 in the gateway log' };
  return guarded(id, async () => {
    const cs = await replicasOf(t, id, 'gateway');
    if (!Array.isArray(cs)) return cs;
    for (const c of cs) {
      const fetched = messages(await t.logs(c)).find((m) => m.msg === 'jwks fetched' && m.status === 200);
      if (fetched) return pass(id, `${c.name}: jwks fetched, status 200, ${String(fetched.url)}`);
    }
    if (!authenticatedCallMade)
      return skip(id, 'no "jwks fetched" line yet and no authenticated call made (give a token for #14)');
    return fail(id, 'no "jwks fetched" line with status 200 in any gateway log after an authenticated call');
  });
}

const FETCH_HEALTH = (url: string) => [
  'node',
  '-e',
  `fetch(${JSON.stringify(url)},{signal:AbortSignal.timeout(4000)}).then(r=>{console.log(r.status);process.exit(r.ok?0:1)},e=>{console.log(e.cause?.code??e.message);process.exit(1)})`,
];

/**
 * #8: the tool server's network alias answers on port 3000 from the container that forwards to it (a gateway),
 * and the gateway's and IdP's aliases from the proxy, which the tunnel reaches.
 */
export function checkAlias(
  t: ComposeTarget,
  from: string,
  alias: string,
  subject: string,
): Promise<CheckRow> {
  const id = { ref: '#8', subject, name: `alias ${alias}:3000 reachable from ${from}` };
  return guarded(id, async () => {
    const cs = await replicasOf(t, id, from);
    if (!Array.isArray(cs)) return cs;
    const url = `http://${alias}:3000/health`;
    // The proxy image has wget (Caddy's Alpine image, the test image); the project image has Node.
    const argv = from === 'proxy' ? ['wget', '-q', '-O', '-', url] : FETCH_HEALTH(url);
    const r = await t.exec(cs[0]!, argv);
    return r.code === 0
      ? pass(id, `GET ${url} from ${cs[0]!.name}: ${r.out.trim().slice(0, 60) || 'ok'}`)
      : fail(id, `GET ${url} from ${cs[0]!.name} failed: ${r.out.trim().slice(0, 200)}`);
  });
}

/** #9: the proxy's upstreams (Caddy's admin API) name the gateway on port 3000. */
export function checkProxyUpstream(t: ComposeTarget): Promise<CheckRow> {
  const id = { ref: '#9', subject: 'proxy', name: 'upstream on port 3000' };
  return guarded(id, async () => {
    const cs = await replicasOf(t, id, 'proxy');
    if (!Array.isArray(cs)) return cs;
    const r = await t.exec(cs[0]!, [
      'wget',
      '-q',
      '-O',
      '-',
      'http://127.0.0.1:2019/reverse_proxy/upstreams',
    ]);
    if (r.code !== 0) return fail(id, `Caddy admin API: ${r.out.trim().slice(0, 200)}`);
    let upstreams: Array<{ address?: string }>;
    try {
      upstreams = JSON.parse(r.out) as Array<{ address?: string }>;
    } catch {
      return fail(id, `Caddy admin API answered no JSON: ${r.out.slice(0, 120)}`);
    }
    const addresses = upstreams.map((u) => u.address ?? '');
    const onPort = addresses.filter((a) => a.endsWith(':3000'));
    if (!addresses.some((a) => a.startsWith('gateway:')))
      return fail(id, `upstreams ${addresses.join(', ') || '(none)'} do not name the gateway`);
    if (onPort.length !== addresses.length)
      return fail(
        id,
        `upstreams not on port 3000: ${addresses.filter((a) => !a.endsWith(':3000')).join(', ')}`,
      );
    return pass(id, `upstreams ${addresses.join(', ')}`);
  });
}

interface IngressRule {
  hostname?: string;
  path?: string;
  service?: string;
}

/**
 * #10: the tunnel's ingress (the config file the `tunnel` service mounts) lists the public host and, for each
 * service, rules that route `/<service>/mcp` and `/<service>/.well-known/oauth-protected-resource`, ahead of the
 * catch-all. `tunnelOff`: why the tunnel is not running (its profile is off); then there is no ingress to
 * check, and each row is a SKIP saying so.
 */
export function checkTunnelIngress(
  t: ComposeTarget,
  baseUrl: string,
  services: readonly string[],
  tunnelOff?: string,
): CheckRow[] {
  if (tunnelOff !== undefined)
    return services.map((s) =>
      skip(
        { ref: '#10', subject: s, name: 'tunnel ingress: host and two path rules' },
        `tunnel: ${tunnelOff}`,
      ),
    );
  const host = new URL(baseUrl).hostname;
  const tunnel = t.services.get('tunnel');
  const mount = tunnel?.volumes
    ?.map((v) => interpolate(v, t.vars))
    .find((v) => v.split(':')[1]?.endsWith('/config.yml'));
  return services.map((s) => {
    const id = { ref: '#10', subject: s, name: 'tunnel ingress: host and two path rules' };
    if (!mount) return skip(id, 'the compose file has no tunnel service mounting a config.yml');
    let rules: IngressRule[];
    try {
      const file = resolve(t.dir, mount.split(':')[0]!);
      rules = ((parse(readFileSync(file, 'utf8')) as { ingress?: IngressRule[] }).ingress ??
        []) as IngressRule[];
    } catch (err) {
      return fail(id, `cannot read the tunnel config: ${(err as Error).message}`);
    }
    const routed = (path: string) =>
      rules.find(
        (r) =>
          (r.hostname === undefined || r.hostname === host) && (!r.path || new RegExp(r.path).test(path)),
      );
    const paths = [`/${s}/mcp`, `/${s}/.well-known/oauth-protected-resource`];
    const problems = paths.flatMap((p) => {
      const r = routed(p);
      if (!r || r.hostname !== host || !r.service?.startsWith('http'))
        return [`${p} is not routed for ${host}${r?.service ? ` (falls to ${r.service})` : ''}`];
      return [];
    });
    return problems.length > 0
      ? fail(id, problems.join('; '))
      : pass(id, `${host}: ${paths.join(', ')} → ${routed(paths[0]!)!.service}`);
  });
}

/** #15: every container that reads DATABASE_URL has a PostgreSQL URL, not a file path (shown without password). */
export function checkDatabaseUrl(t: ComposeTarget, service: string): Promise<CheckRow> {
  const id = { ref: '#15', subject: service, name: 'DATABASE_URL is PostgreSQL' };
  return guarded(id, async () => {
    const cs = await replicasOf(t, id, service);
    if (!Array.isArray(cs)) return cs;
    // Given as a file (DATABASE_URL_FILE, a Docker secret): the server itself checks it at start-up and refuses
    // to start on anything but a PostgreSQL URL, and the doctor does not read secrets out of containers.
    const files = cs.filter((c) => c.env.get('DATABASE_URL') === undefined && c.env.get('DATABASE_URL_FILE'));
    if (files.length === cs.length && files.length > 0) {
      return pass(
        id,
        `from the file ${files[0]!.env.get('DATABASE_URL_FILE')} (checked by the server at start-up)`,
      );
    }
    const values = new Set(cs.map((c) => c.env.get('DATABASE_URL') ?? ''));
    for (const v of values) {
      if (!/^postgresql(\+asyncpg)?:\/\/[^/]/.test(v))
        return fail(
          id,
          `DATABASE_URL is ${v === '' ? 'unset' : `"${v.slice(0, 40)}"`}, not a PostgreSQL URL`,
        );
    }
    const shown = [...values].map((v) => v.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@'));
    return pass(id, shown.join(', '));
  });
}
