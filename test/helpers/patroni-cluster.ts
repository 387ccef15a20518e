// A Postgres HA cluster of the test's own, from the shipped deploy/postgres-ha/ files: one etcd, two Patroni
// nodes (synchronous replication) and HAProxy as the write endpoint, all on free loopback ports under one
// temporary directory. Nothing here touches the machine's shared Postgres. Patroni runs PostgreSQL, which
// refuses root: as root, Patroni runs as the `postgres` user.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { freePort } from './processes.ts';

const PATRONI_YML = new URL('../../deploy/postgres-ha/patroni.yml', import.meta.url);
const HAPROXY_CFG = new URL('../../deploy/postgres-ha/haproxy.cfg', import.meta.url);
const PG_BIN = '/usr/lib/postgresql/15/bin';

export function havePatroni(): boolean {
  try {
    for (const cmd of ['patroni', 'etcd', 'haproxy']) execFileSync('which', [cmd], { stdio: 'ignore' });
    execFileSync(`${PG_BIN}/postgres`, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export interface PatroniNode {
  name: string;
  pgPort: number;
  restPort: number;
  /** Direct to this node, bypassing the endpoint. */
  url: string;
  dataDir: string;
  /** SIGKILL to Patroni and to its PostgreSQL at once: the node is gone, as in a machine failure. */
  kill(): void;
}

export interface PatroniCluster {
  /** The write endpoint (HAProxy), as a component's DATABASE_URL names it. */
  url: string;
  nodes: PatroniNode[];
  /** The node whose Patroni answers GET /primary with 200, if any. */
  primary(): Promise<PatroniNode | undefined>;
  /** What HAProxy and Patroni wrote, for a failure message. */
  logs(): string;
  destroy(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function status(url: string): Promise<number> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(1000) })).status;
  } catch {
    return 0;
  }
}

/** Each server's status (UP, DOWN, …) as HAProxy's stats socket reports it. */
async function serverStates(socket: string): Promise<Map<string, string>> {
  const csv = await new Promise<string>((resolve) => {
    let out = '';
    const c = net.connect(socket, () => c.end('show stat\n'));
    c.on('data', (d) => {
      out += d.toString();
    });
    c.on('close', () => resolve(out));
    c.on('error', () => resolve(''));
  });
  const states = new Map<string, string>();
  const lines = csv.split('\n');
  const header = (lines[0] ?? '').replace(/^# /, '').split(',');
  const [sv, status] = [header.indexOf('svname'), header.indexOf('status')];
  for (const l of lines.slice(1)) {
    const f = l.split(',');
    if (f[sv] && f[status]) states.set(f[sv]!, f[status]!);
  }
  return states;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number, logs: () => string) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}\n${logs().slice(-4000)}`);
}

export async function startPatroniCluster(opts: { ttl?: number } = {}): Promise<PatroniCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'pg-ha-'));
  chmodSync(dir, 0o755);
  const asRoot = process.getuid?.() === 0;
  const ids = asRoot
    ? {
        uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
        gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
      }
    : undefined;
  if (ids) chownSync(dir, ids.uid, ids.gid);
  const children: ChildProcess[] = [];
  const output = new Map<string, string>();
  const run = (name: string, cmd: string, args: string[], asPostgres = false) => {
    const child = spawn(cmd, args, {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir, LANG: 'C.UTF-8' },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(asPostgres && ids ? ids : {}),
    });
    output.set(name, '');
    const keep = (d: Buffer) => output.set(name, (output.get(name)! + d.toString()).slice(-20_000));
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    children.push(child);
    return child;
  };
  const logs = () => [...output].map(([n, o]) => `--- ${n}\n${o}`).join('\n');

  // etcd: a single member is enough for the test (production runs three).
  const [etcdClient, etcdPeer] = [await freePort(), await freePort()];
  mkdirSync(join(dir, 'etcd'));
  run('etcd', 'etcd', [
    '--name=e1',
    `--data-dir=${join(dir, 'etcd')}`,
    `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
    `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
    `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
    `--initial-cluster=e1=http://127.0.0.1:${etcdPeer}`,
  ]);
  await until(
    'etcd',
    async () => (await status(`http://127.0.0.1:${etcdClient}/health`)) === 200,
    20_000,
    logs,
  );

  const shipped = parse(readFileSync(PATRONI_YML, 'utf8'));
  const ttl = opts.ttl ?? 10;
  const nodes: Array<PatroniNode & { child?: ChildProcess; start(): void }> = [];
  for (const name of ['pg1', 'pg2']) {
    const [pgPort, restPort] = [await freePort(), await freePort()];
    const dataDir = join(dir, name);
    const cfg = structuredClone(shipped);
    cfg.scope = `platform-test-${process.pid}`;
    cfg.name = name;
    cfg.restapi = { listen: `127.0.0.1:${restPort}`, connect_address: `127.0.0.1:${restPort}` };
    cfg.etcd3 = { hosts: `127.0.0.1:${etcdClient}` };
    // Shorter timings than production's so the test's switch takes seconds (ttl ≥ loop_wait + 2 × retry_timeout).
    Object.assign(cfg.bootstrap.dcs, { ttl, loop_wait: 1, retry_timeout: Math.floor((ttl - 1) / 2) });
    cfg.bootstrap.dcs.postgresql.use_pg_rewind = false;
    Object.assign(cfg.bootstrap.dcs.postgresql.parameters, { fsync: 'off', max_connections: 100 });
    cfg.bootstrap.initdb = [{ encoding: 'UTF8' }, { auth: 'trust' }];
    cfg.bootstrap.pg_hba = [
      'local all all trust',
      'host all all 127.0.0.1/32 trust',
      'host replication all 127.0.0.1/32 trust',
    ];
    Object.assign(cfg.postgresql, {
      listen: `127.0.0.1:${pgPort}`,
      connect_address: `127.0.0.1:${pgPort}`,
      data_dir: dataDir,
      bin_dir: PG_BIN,
      pgpass: join(dir, `${name}.pgpass`),
      authentication: { superuser: { username: 'postgres' }, replication: { username: 'postgres' } },
      parameters: { unix_socket_directories: dir },
    });
    const file = join(dir, `${name}.yml`);
    writeFileSync(file, stringify(cfg));
    const node: (typeof nodes)[number] = {
      name,
      pgPort,
      restPort,
      dataDir,
      url: `postgresql://postgres@127.0.0.1:${pgPort}/postgres`,
      start() {
        node.child = run(name, 'patroni', [file], true);
      },
      kill() {
        let postmaster: number | undefined;
        try {
          postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
        } catch {
          // not running
        }
        node.child?.kill('SIGKILL');
        if (postmaster) {
          try {
            process.kill(postmaster, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      },
    };
    nodes.push(node);
  }
  const rest = (n: PatroniNode, path: string) => status(`http://127.0.0.1:${n.restPort}${path}`);

  // The endpoint: the shipped listen section, on a free port and with our two nodes as its servers.
  const endpointPort = await freePort();
  const servers = nodes
    .map((n) => `    server ${n.name} 127.0.0.1:${n.pgPort} maxconn 100 check port ${n.restPort}`)
    .join('\n');
  const haproxyCfg = readFileSync(HAPROXY_CFG, 'utf8')
    .replace(/^\s*bind \*:5000$/m, `    bind 127.0.0.1:${endpointPort}`)
    .replace(/(^\s*server .*\n?)+/m, `${servers}\n`)
    .replace(/inter 1s/, 'inter 500ms')
    .replace(/^global\n/m, `global\n    stats socket ${join(dir, 'haproxy.sock')}\n`);
  writeFileSync(join(dir, 'haproxy.cfg'), haproxyCfg);

  const cluster: PatroniCluster = {
    url: `postgresql://postgres@127.0.0.1:${endpointPort}/postgres`,
    nodes,
    async primary() {
      for (const n of nodes) if ((await rest(n, '/primary')) === 200) return n;
      return undefined;
    },
    logs,
    async destroy() {
      for (const n of nodes) n.kill();
      for (const c of children) c.kill('SIGKILL');
      // Backends of a killed postmaster notice and exit; give them a moment before the files go.
      await sleep(300);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    nodes[0]!.start();
    await until('pg1 to lead', async () => (await rest(nodes[0]!, '/primary')) === 200, 60_000, logs);
    nodes[1]!.start();
    // /sync: 200 once pg2 is the synchronous standby, so every later commit is on both nodes.
    await until(
      'pg2 as synchronous standby',
      async () => (await rest(nodes[1]!, '/sync')) === 200,
      60_000,
      logs,
    );
    run('haproxy', 'haproxy', ['-db', '-f', join(dir, 'haproxy.cfg')]);
    // HAProxy counts every server up until its first checks fail: wait until only the leader is.
    await until(
      'the endpoint to route to pg1 only',
      async () => {
        const states = await serverStates(join(dir, 'haproxy.sock'));
        return states.get('pg1') === 'UP' && states.get('pg2') === 'DOWN';
      },
      20_000,
      logs,
    );
  } catch (err) {
    await cluster.destroy();
    throw err;
  }
  return cluster;
}
