// Redis high-availability topologies of the test's own (never the machine's shared Redis): one primary, one
// replica and three Sentinels, or a 3-master + 3-replica Cluster, as real redis-server processes on free loopback
// ports, each in its own temporary directory. Teardown is by the PIDs started here (SIGKILL), never by name.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Redis } from 'ioredis';
import { freePort } from './processes.ts';
import { onRedis } from './throwaway-redis.ts';

const run = promisify(execFile);

export interface RedisNode {
  port: number;
  child: ChildProcess;
  /** SIGKILL: what it held and had not replicated is gone. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT: frozen, its connections open (a replica that receives nothing meanwhile). */
  pause(): void;
  resume(): void;
}

class Processes {
  readonly dir = mkdtempSync(join(tmpdir(), 'platform-redis-ha-'));
  readonly #nodes: RedisNode[] = [];

  start(args: string[], port: number): RedisNode {
    const child = spawn('redis-server', args, { stdio: 'ignore', cwd: this.dir });
    const node: RedisNode = {
      port,
      child,
      async kill() {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((res) => child.once('exit', res));
        child.kill('SIGKILL');
        await exited;
      },
      pause: () => child.kill('SIGSTOP'),
      resume: () => child.kill('SIGCONT'),
    };
    this.#nodes.push(node);
    return node;
  }

  async stop(): Promise<void> {
    for (const n of this.#nodes) if (n.child.exitCode === null) n.child.kill('SIGCONT');
    await Promise.all(this.#nodes.map((n) => n.kill()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** One command on a short-lived connection to 127.0.0.1:`port`. */
export const onNode = <T>(port: number, password: string, fn: (r: Redis) => Promise<T>): Promise<T> =>
  onRedis(port, password, fn);

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what} (${(last as Error)?.message ?? ''})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const serverArgs = (port: number, dir: string, password: string) => [
  '--port',
  String(port),
  '--bind',
  '127.0.0.1',
  '--dir',
  dir,
  '--save',
  '',
  '--appendonly',
  'no',
  '--requirepass',
  password,
  '--masterauth',
  password,
];

export interface SentinelSet {
  /** The master group name the Sentinels monitor. */
  name: string;
  /** The data nodes' password (requirepass) and the Sentinels' own (their requirepass). */
  password: string;
  sentinelPassword: string;
  primary: RedisNode;
  replica: RedisNode;
  sentinels: RedisNode[];
  /** `host:port,…` of the Sentinels. */
  sentinelList: string;
  /** The port the Sentinels name as master now. */
  masterPort(): Promise<number>;
  stop(): Promise<void>;
}

/** A primary, a replica and three Sentinels (quorum 2, down-after 1000 ms), all with passwords. */
export async function startSentinelSet(): Promise<SentinelSet> {
  const p = new Processes();
  const name = 'platform-ha';
  const password = `data-${Math.random().toString(36).slice(2)}`;
  const sentinelPassword = `sentinel-${Math.random().toString(36).slice(2)}`;
  try {
    const [pp, rp, ...sp] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
    const primary = p.start(serverArgs(pp!, p.dir, password), pp!);
    const replica = p.start(
      [...serverArgs(rp!, p.dir, password), '--replicaof', '127.0.0.1', String(pp)],
      rp!,
    );
    await until('the replica in sync', () =>
      onNode(rp!, password, async (r) =>
        (await r.info('replication')).includes('master_link_status:up') ? true : undefined,
      ),
    );
    const sentinels = sp.map((port, i) => {
      const conf = join(p.dir, `sentinel-${i}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${p.dir}`,
          `requirepass ${sentinelPassword}`,
          `sentinel monitor ${name} 127.0.0.1 ${pp} 2`,
          `sentinel auth-pass ${name} ${password}`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 10000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      return p.start([conf, '--sentinel'], port!);
    });
    const masterPort = async () =>
      onNode(sentinels[0]!.port, sentinelPassword, async (r) => {
        const addr = (await r.call('SENTINEL', 'get-master-addr-by-name', name)) as [string, string];
        return Number(addr[1]);
      });
    // Every Sentinel knows the replica and the other two before the test starts.
    await until('the Sentinels to see each other and the replica', async () => {
      for (const s of sentinels) {
        const ok = await onNode(s.port, sentinelPassword, async (r) => {
          const m = (await r.call('SENTINEL', 'master', name)) as string[];
          const f = (k: string) => Number(m[m.indexOf(k) + 1]);
          return f('num-slaves') === 1 && f('num-other-sentinels') === 2;
        });
        if (!ok) return undefined;
      }
      return true;
    });
    return {
      name,
      password,
      sentinelPassword,
      primary,
      replica,
      sentinels,
      sentinelList: sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
      masterPort,
      stop: () => p.stop(),
    };
  } catch (err) {
    await p.stop();
    throw err;
  }
}

export interface RedisCluster {
  password: string;
  nodes: RedisNode[];
  /** `host:port,…` of every node, masters first. */
  nodeList: string;
  /** Port → role and, for a replica, its master's port (read from a node that is up). */
  topology(): Promise<Map<number, { role: 'master' | 'replica'; masterPort?: number; failed: boolean }>>;
  stop(): Promise<void>;
}

/** Six cluster-enabled nodes (node timeout 2000 ms) joined with `redis-cli --cluster create --cluster-replicas 1`. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const p = new Processes();
  const password = `cluster-${Math.random().toString(36).slice(2)}`;
  try {
    const ports = await Promise.all(Array.from({ length: 6 }, () => freePort()));
    const nodes = ports.map((port, i) => {
      const conf = `nodes-${i}.conf`;
      return p.start(
        [
          ...serverArgs(port, p.dir, password),
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          conf,
          '--cluster-node-timeout',
          '2000',
        ],
        port,
      );
    });
    for (const n of nodes) await until(`node ${n.port}`, () => onNode(n.port, password, (r) => r.ping()));
    await run('redis-cli', [
      '-a',
      password,
      '--no-auth-warning',
      '--cluster',
      'create',
      ...ports.map((port) => `127.0.0.1:${port}`),
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    ]);
    const topology = async (from?: number) => {
      for (const n of nodes) {
        if (from !== undefined && n.port !== from) continue;
        if (n.child.exitCode !== null || n.child.signalCode !== null) continue;
        const text = await onNode(n.port, password, (r) => r.call('CLUSTER', 'NODES') as Promise<string>);
        const byId = new Map<string, number>();
        const rows = text
          .trim()
          .split('\n')
          .map((l) => l.split(' '));
        for (const r of rows) byId.set(r[0]!, Number(r[1]!.split(':')[1]!.split('@')[0]));
        const out = new Map<number, { role: 'master' | 'replica'; masterPort?: number; failed: boolean }>();
        for (const r of rows) {
          const flags = r[2]!.split(',');
          out.set(byId.get(r[0]!)!, {
            role: flags.includes('master') ? 'master' : 'replica',
            masterPort: r[3] === '-' ? undefined : byId.get(r[3]!),
            failed: flags.includes('fail') || flags.includes('fail?'),
          });
        }
        return out;
      }
      throw new Error('no cluster node is up');
    };
    await until('every node to report cluster_state:ok', async () => {
      for (const n of nodes) {
        const info = await onNode(n.port, password, (r) => r.call('CLUSTER', 'INFO') as Promise<string>);
        if (!info.includes('cluster_state:ok')) return undefined;
      }
      const t = await topology();
      return [...t.values()].filter((v) => v.role === 'master').length === 3 ? true : undefined;
    });
    // Every replica through its first full sync: a replica still loading its master's data is not eligible for
    // promotion (it would not take over when its master is killed, and the cluster would stay down).
    await until(
      'every replica in sync with its master',
      async () => {
        for (const n of nodes) {
          const info = await onNode(n.port, password, (r) => r.info('replication'));
          if (
            info.includes('role:slave') &&
            !/master_link_status:up[\s\S]*master_sync_in_progress:0/.test(info)
          )
            return undefined;
        }
        return true;
      },
      60_000,
    );
    const t = await topology();
    const ordered = [...nodes].sort(
      (a, b) => (t.get(a.port)!.role === 'master' ? 0 : 1) - (t.get(b.port)!.role === 'master' ? 0 : 1),
    );
    return {
      password,
      nodes: ordered,
      nodeList: ordered.map((n) => `127.0.0.1:${n.port}`).join(','),
      topology: () => topology(),
      stop: () => p.stop(),
    };
  } catch (err) {
    await p.stop();
    throw err;
  }
}
