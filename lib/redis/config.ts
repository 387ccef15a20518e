import { ConfigError, type Env, optionalString, refuseExampleSecret, secret } from '../config.ts';

// How a process reaches Redis, written once for the IdP, the gateway and `platform dev` (docs/deploy.md § Redis
// high availability). Three shapes, each one URL (the `REDIS_URL` value; the per-process configs keep that
// string and lib/redis/client.ts opens it):
//   redis://[user:pass@]host:port[/db]                         one server (rediss:// for TLS)
//   redis+sentinel://[user:pass@]host:port,host:port/<master>[/db][?sentinel_username=…&sentinel_password=…]
//   redis+cluster://[user:pass@]host:port,host:port            a Redis Cluster (any reachable nodes as seeds)
// (rediss+sentinel:// and rediss+cluster:// speak TLS to every node.) The variables REDIS_SENTINELS with
// REDIS_SENTINEL_MASTER, or REDIS_CLUSTER_NODES, with REDIS_USERNAME / REDIS_PASSWORD, say the same without a
// URL; REDIS_SENTINEL_USERNAME / REDIS_SENTINEL_PASSWORD give the Sentinels' own credentials in both forms.

export interface HostPort {
  host: string;
  port: number;
}

export type RedisConnection =
  | { kind: 'standalone'; url: string }
  | {
      kind: 'sentinel';
      tls: boolean;
      sentinels: HostPort[];
      /** The master group name the Sentinels monitor. */
      name: string;
      db: number;
      username?: string;
      password?: string;
      sentinelUsername?: string;
      sentinelPassword?: string;
    }
  | { kind: 'cluster'; tls: boolean; nodes: HostPort[]; username?: string; password?: string };

const SCHEMES =
  'redis://, rediss://, redis+sentinel://, rediss+sentinel://, redis+cluster:// or rediss+cluster://';
const SENTINEL_PARAMS = ['sentinel_username', 'sentinel_password'];

function decode(variable: string, part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new ConfigError(variable, `${what} is not valid percent-encoding`);
  }
}

/** `host:port` list (`[v6]:port` too); `fallbackPort` when a host has none. */
export function parseHostList(variable: string, text: string, fallbackPort: number): HostPort[] {
  const items = text.split(',').map((s) => s.trim());
  if (items.length === 0 || items.some((s) => s === '')) {
    throw new ConfigError(variable, `must be a comma-separated list of host:port, got "${text}"`);
  }
  return items.map((item) => {
    const m = /^\[([0-9a-fA-F:.]+)\](?::(\d+))?$/.exec(item) ?? /^([A-Za-z0-9.\-_]+)(?::(\d+))?$/.exec(item);
    if (!m) throw new ConfigError(variable, `"${item}" is not host:port`);
    const port = m[2] === undefined ? fallbackPort : Number(m[2]);
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new ConfigError(variable, `"${item}": the port must be between 1 and 65535`);
    }
    return { host: m[1]!, port };
  });
}

function parseDb(variable: string, text: string): number {
  if (!/^\d{1,5}$/.test(text))
    throw new ConfigError(variable, `the database must be a number, got "${text}"`);
  return Number(text);
}

/**
 * Parses one of the three URL shapes; every problem is one line naming the variable (the password is never
 * printed). Passwords that are published examples are refused.
 */
export function parseRedisUrl(url: string, variable = 'REDIS_URL'): RedisConnection {
  if (/^rediss?:\/\//.test(url)) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ConfigError(variable, 'is not a valid URL');
    }
    if (parsed.password !== '') {
      refuseExampleSecret(
        variable,
        decode(variable, parsed.password, 'the password'),
        'carries a password that is',
      );
    }
    return { kind: 'standalone', url };
  }
  const m = /^(rediss?)\+(sentinel|cluster):\/\/(?:([^@/?#]*)@)?([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?$/.exec(
    url,
  );
  if (!m) throw new ConfigError(variable, `must begin with ${SCHEMES}`);
  const [, scheme, kind, userinfo, hosts, path = '', query = ''] = m;
  const tls = scheme === 'rediss';
  let username: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
    username = user === '' ? undefined : decode(variable, user, 'the user name');
    password = colon < 0 ? undefined : decode(variable, userinfo.slice(colon + 1), 'the password');
    if (password === '') password = undefined;
  }
  if (password !== undefined) refuseExampleSecret(variable, password, 'carries a password that is');
  if (hosts === '') throw new ConfigError(variable, 'names no host (host:port,host:port)');
  const segments = path.split('/').filter((s) => s !== '');
  const params = new URLSearchParams(query);
  if (kind === 'cluster') {
    const nodes = parseHostList(variable, hosts!, 6379);
    if (segments.length > 1 || (segments[0] !== undefined && parseDb(variable, segments[0]) !== 0)) {
      throw new ConfigError(variable, 'a Redis Cluster has database 0 only');
    }
    for (const k of params.keys()) throw new ConfigError(variable, `unknown parameter "${k}" for a cluster`);
    return { kind: 'cluster', tls, nodes, username, password };
  }
  const sentinels = parseHostList(variable, hosts!, 26379);
  const name = segments[0] === undefined ? undefined : decode(variable, segments[0], 'the master name');
  if (name === undefined || name === '') {
    throw new ConfigError(variable, 'names no master: redis+sentinel://host:port,host:port/<master name>');
  }
  if (segments.length > 2) throw new ConfigError(variable, 'has more than /<master name>/<database>');
  const db = segments[1] === undefined ? 0 : parseDb(variable, segments[1]);
  for (const k of params.keys()) {
    if (!SENTINEL_PARAMS.includes(k)) {
      throw new ConfigError(variable, `unknown parameter "${k}" (allowed: ${SENTINEL_PARAMS.join(', ')})`);
    }
  }
  const sentinelUsername = params.get('sentinel_username') || undefined;
  const sentinelPassword = params.get('sentinel_password') || undefined;
  if (sentinelPassword !== undefined) {
    refuseExampleSecret(variable, sentinelPassword, 'carries a Sentinel password that is');
  }
  return {
    kind: 'sentinel',
    tls,
    sentinels,
    name,
    db,
    username,
    password,
    sentinelUsername,
    sentinelPassword,
  };
}

/** The URL form of a connection (what the per-process configs hold). */
export function formatRedisUrl(c: RedisConnection): string {
  if (c.kind === 'standalone') return c.url;
  const e = encodeURIComponent;
  const auth =
    c.username !== undefined || c.password !== undefined
      ? `${e(c.username ?? '')}${c.password === undefined ? '' : `:${e(c.password)}`}@`
      : '';
  const hostPort = (h: HostPort) => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`;
  const scheme = `${c.tls ? 'rediss' : 'redis'}+${c.kind}://`;
  if (c.kind === 'cluster') return `${scheme}${auth}${c.nodes.map(hostPort).join(',')}`;
  const q = new URLSearchParams();
  if (c.sentinelUsername !== undefined) q.set('sentinel_username', c.sentinelUsername);
  if (c.sentinelPassword !== undefined) q.set('sentinel_password', c.sentinelPassword);
  const query = q.size > 0 ? `?${q}` : '';
  return `${scheme}${auth}${c.sentinels.map(hostPort).join(',')}/${e(c.name)}/${c.db}${query}`;
}

/** The same connection with the password(s) replaced: for logs and error messages. */
export function redactRedisUrl(url: string): string {
  return url.replace(/(\/\/[^:@/]*:)[^@]*@/, '$1***@').replace(/(sentinel_password=)[^&]*/, '$1***');
}

/**
 * Reads the Redis variables of a process: `REDIS_URL` (any of the three shapes), or `REDIS_SENTINELS` +
 * `REDIS_SENTINEL_MASTER`, or `REDIS_CLUSTER_NODES` (data-node credentials then in `REDIS_USERNAME` /
 * `REDIS_PASSWORD`); `REDIS_SENTINEL_USERNAME` / `REDIS_SENTINEL_PASSWORD` with either Sentinel form. Returns
 * the connection's URL form, or undefined when none is set. `name`: another URL variable read alone (the
 * benchmarks' BENCH_REDIS_URL).
 */
export function redisUrl(env: Env, name = 'REDIS_URL'): string | undefined {
  if (name !== 'REDIS_URL') {
    const v = optionalString(env, name);
    return v === undefined ? undefined : formatRedisUrl(parseRedisUrl(v, name));
  }
  // REDIS_URL (its password inside) and the passwords may come from files (REDIS_URL_FILE, …: Docker and
  // Kubernetes secrets); errors name the variable the value came from.
  const urlSecret = secret(env, 'REDIS_URL');
  const url = urlSecret?.value;
  const sentinels = optionalString(env, 'REDIS_SENTINELS');
  const master = optionalString(env, 'REDIS_SENTINEL_MASTER');
  const clusterNodes = optionalString(env, 'REDIS_CLUSTER_NODES');
  const username = optionalString(env, 'REDIS_USERNAME');
  const password = secret(env, 'REDIS_PASSWORD')?.value;
  const sentinelUsername = optionalString(env, 'REDIS_SENTINEL_USERNAME');
  const sentinelPassword = secret(env, 'REDIS_SENTINEL_PASSWORD')?.value;
  refuseExampleSecret('REDIS_PASSWORD', password);
  refuseExampleSecret('REDIS_SENTINEL_PASSWORD', sentinelPassword);
  const set = [
    ['REDIS_URL', url],
    ['REDIS_SENTINELS', sentinels],
    ['REDIS_CLUSTER_NODES', clusterNodes],
  ].filter(([, v]) => v !== undefined);
  if (set.length > 1) {
    throw new ConfigError(set[1]![0]!, `set only one of ${set.map(([n]) => n).join(' and ')}`);
  }
  if (master !== undefined && sentinels === undefined) {
    throw new ConfigError('REDIS_SENTINEL_MASTER', 'is used with REDIS_SENTINELS only');
  }
  if (url !== undefined) {
    for (const [name, v] of [
      ['REDIS_USERNAME', username],
      ['REDIS_PASSWORD', password],
    ] as const) {
      if (v !== undefined)
        throw new ConfigError(name, 'is not used with REDIS_URL (put the credentials in the URL)');
    }
  }
  let c: RedisConnection | undefined;
  if (url !== undefined) c = parseRedisUrl(url, urlSecret!.from);
  else if (sentinels !== undefined) {
    if (master === undefined)
      throw new ConfigError('REDIS_SENTINEL_MASTER', 'is required with REDIS_SENTINELS');
    c = {
      kind: 'sentinel',
      tls: false,
      sentinels: parseHostList('REDIS_SENTINELS', sentinels, 26379),
      name: master,
      db: 0,
      username,
      password,
    };
  } else if (clusterNodes !== undefined) {
    c = {
      kind: 'cluster',
      tls: false,
      nodes: parseHostList('REDIS_CLUSTER_NODES', clusterNodes, 6379),
      username,
      password,
    };
  }
  if (c === undefined) {
    if (sentinelUsername !== undefined || sentinelPassword !== undefined) {
      throw new ConfigError('REDIS_SENTINEL_PASSWORD', 'is used with a Sentinel connection only');
    }
    return undefined;
  }
  if (sentinelUsername !== undefined || sentinelPassword !== undefined) {
    if (c.kind !== 'sentinel') {
      throw new ConfigError(
        sentinelPassword !== undefined ? 'REDIS_SENTINEL_PASSWORD' : 'REDIS_SENTINEL_USERNAME',
        'is used with a Sentinel connection only',
      );
    }
    c = {
      ...c,
      sentinelUsername: sentinelUsername ?? c.sentinelUsername,
      sentinelPassword: sentinelPassword ?? c.sentinelPassword,
    };
  }
  return formatRedisUrl(c);
}
