// A private Docker Swarm for test/ha/swarm.test.ts, never the shared engine: each node is a dockerd of its own
// (own --data-root, --exec-root, socket, pidfile, cgroup parent, bridge) in a network namespace of its own. A
// "hub" namespace holds a bridge that joins the nodes (a veth pair each) and the host (one more veth pair,
// whose host end has the .254 address: the test reaches the nodes' published ports through it). Everything made
// is recorded as it is made, so teardown removes exactly that, also after a failure half-way.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { run } from '../containers/docker.ts';

export const DOCKER = existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker';
/** The shared engine, read only: the images are built there (the container suite's recipe) and saved from it. */
export const SHARED = ['-H', 'unix:///var/run/docker.sock'];

export interface SwarmNode {
  index: number;
  ns: string;
  address: string;
  socket: string;
  /** `docker -H <this node's socket>` arguments. */
  host: string[];
  dockerd: ChildProcess;
  dir: string;
}

export class PrivateSwarm {
  readonly id = `psw${randomBytes(3).toString('hex')}`;
  readonly dir = `/tmp/${this.id}`;
  readonly hubNs = `${this.id}hub`;
  readonly hostVeth = `${this.id}h`;
  readonly nodes: SwarmNode[] = [];
  /** 10.<a>.<b>.0/24, chosen not to overlap a route of the host. */
  subnet = '';
  private made = { hub: false, hostVeth: false, nodeNs: [] as string[] };

  static async create(): Promise<PrivateSwarm> {
    const s = new PrivateSwarm();
    mkdirSync(s.dir, { recursive: true });
    const routes = (await run('ip', ['-4', 'route'])).stdout;
    for (let i = 0; i < 50 && !s.subnet; i++) {
      const c = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
      if (!routes.includes(`${c}.`)) s.subnet = c;
    }
    await s.ip(['netns', 'add', s.hubNs]);
    s.made.hub = true;
    await s.ip(['-n', s.hubNs, 'link', 'set', 'lo', 'up']);
    await s.ip(['-n', s.hubNs, 'link', 'add', 'br0', 'type', 'bridge']);
    await s.ip(['-n', s.hubNs, 'link', 'set', 'br0', 'up']);
    await s.ip(['link', 'add', s.hostVeth, 'type', 'veth', 'peer', 'name', 'hostp', 'netns', s.hubNs]);
    s.made.hostVeth = true;
    await s.ip(['-n', s.hubNs, 'link', 'set', 'hostp', 'master', 'br0', 'up']);
    await s.ip(['addr', 'add', `${s.subnet}.254/24`, 'dev', s.hostVeth]);
    await s.ip(['link', 'set', s.hostVeth, 'up']);
    return s;
  }

  private ip(args: string[]) {
    return run('ip', args, { timeoutMs: 20_000 });
  }

  /** A node: its namespace on the hub's bridge, its own dockerd, answering. */
  async addNode(): Promise<SwarmNode> {
    const index = this.nodes.length + 1;
    const ns = `${this.id}n${index}`;
    const address = `${this.subnet}.${index}`;
    await this.ip(['netns', 'add', ns]);
    this.made.nodeNs.push(ns);
    await this.ip(['-n', ns, 'link', 'set', 'lo', 'up']);
    await this.ip([
      '-n',
      this.hubNs,
      'link',
      'add',
      `n${index}`,
      'type',
      'veth',
      'peer',
      'name',
      'eth0',
      'netns',
      ns,
    ]);
    await this.ip(['-n', this.hubNs, 'link', 'set', `n${index}`, 'master', 'br0', 'up']);
    await this.ip(['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
    await this.ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
    await this.ip(['-n', ns, 'route', 'add', 'default', 'via', `${this.subnet}.254`]);
    const dir = join(this.dir, `n${index}`);
    mkdirSync(dir, { recursive: true });
    const socket = join(dir, 'docker.sock');
    const log = openSync(join(dir, 'dockerd.log'), 'a');
    // nsenter, not `ip netns exec`: the latter remounts /sys and hides the cgroup hierarchy dockerd needs.
    // DOCKER_SERVICE_PREFER_OFFLINE_IMAGE: a task uses the loaded image without asking a registry first.
    const dockerd = spawn(
      'nsenter',
      [
        `--net=/var/run/netns/${ns}`,
        'dockerd',
        '--data-root',
        join(dir, 'data'),
        '--exec-root',
        join(dir, 'exec'),
        '--pidfile',
        join(dir, 'dockerd.pid'),
        '-H',
        `unix://${socket}`,
        '--cgroup-parent',
        `/${ns}`,
        '--bip',
        `10.${250 - index}.${index}.1/24`,
        '--default-address-pool',
        `base=10.${240 - index}.0.0/16,size=24`,
      ],
      { stdio: ['ignore', log, log], env: { ...process.env, DOCKER_SERVICE_PREFER_OFFLINE_IMAGE: '1' } },
    );
    dockerd.on('error', () => {});
    const node: SwarmNode = { index, ns, address, socket, host: ['-H', `unix://${socket}`], dockerd, dir };
    this.nodes.push(node);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ok = await run(DOCKER, [...node.host, 'version', '--format', '{{.Server.Version}}'], {
        timeoutMs: 5000,
      }).then(
        () => true,
        () => false,
      );
      if (ok) return node;
      if (Date.now() > deadline || dockerd.exitCode !== null)
        throw new Error(`node ${index}: dockerd did not answer:\n${this.log(node).slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  log(node: SwarmNode): string {
    try {
      return readFileSync(join(node.dir, 'dockerd.log'), 'utf8');
    } catch {
      return '';
    }
  }

  docker(
    node: SwarmNode,
    args: string[],
    opts: { timeoutMs?: number; cwd?: string; env?: NodeJS.ProcessEnv } = {},
  ) {
    return run(DOCKER, [...node.host, ...args], { timeoutMs: opts.timeoutMs ?? 120_000, ...opts });
  }

  /** `docker save` from the shared engine piped into `docker load` on the node. */
  async load(node: SwarmNode, images: string[]): Promise<void> {
    await run(
      'sh',
      [
        '-c',
        `"${DOCKER}" ${SHARED.join(' ')} save ${images.join(' ')} | "${DOCKER}" -H unix://${node.socket} load -q`,
      ],
      { timeoutMs: 300_000 },
    );
  }

  /** Everything this swarm made: daemons (and their containers), mounts, namespaces, veths, the directory. */
  async teardown(): Promise<void> {
    for (const node of [...this.nodes].reverse()) {
      await this.docker(node, ['swarm', 'leave', '--force'], { timeoutMs: 60_000 }).catch(() => {});
      await run(
        'sh',
        [
          '-c',
          `"${DOCKER}" -H unix://${node.socket} ps -aq | xargs -r "${DOCKER}" -H unix://${node.socket} rm -f`,
        ],
        {
          timeoutMs: 120_000,
        },
      ).catch(() => {});
      if (node.dockerd.exitCode === null) {
        const exited = new Promise((r) => node.dockerd.once('exit', r));
        node.dockerd.kill('SIGTERM');
        const timer = setTimeout(() => node.dockerd.kill('SIGKILL'), 30_000);
        await exited;
        clearTimeout(timer);
      }
    }
    // Mounts left under the directory (overlay layers, netns files of containers), deepest first.
    await run('sh', [
      '-c',
      `awk '$2 ~ "^${this.dir}/" {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l`,
    ]).catch(() => {});
    for (const ns of this.made.nodeNs.reverse()) await this.ip(['netns', 'del', ns]).catch(() => {});
    if (this.made.hostVeth) await this.ip(['link', 'del', this.hostVeth]).catch(() => {});
    if (this.made.hub) await this.ip(['netns', 'del', this.hubNs]).catch(() => {});
    rmSync(this.dir, { recursive: true, force: true });
  }
}
