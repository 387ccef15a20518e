// Compose v2 for the suite's second build: `docker compose`, the docker CLI's plugin. When the docker CLI on
// PATH has none (Debian bookworm packages only docker-compose 1.29), the plugin comes from Debian's own
// package of Compose v2 and buildx (trixie's docker-compose 2.x and docker-buildx: Go binaries that need
// only libc): `apt-get download` with a private apt state (the host's sources and lists stay untouched),
// unpacked — never installed, which would replace docker-compose 1.29 — under a cache directory that a later
// run reuses, and found by the CLI through DOCKER_CONFIG/cli-plugins.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ContainerSuiteConfig } from './config.ts';
import { run } from './docker.ts';

export interface ComposeV2 {
  /** The docker CLI that runs `docker compose` (the one on PATH, as an operator types it). */
  docker: string;
  /** Its environment: DOCKER_CONFIG set when the plugin is the suite's unpacked one. */
  env: NodeJS.ProcessEnv;
  version: string;
  /** Where the plugin came from, for the suite's log. */
  source: string;
}

const SUITE = 'trixie';
const PACKAGES = ['docker-compose', 'docker-buildx'];

async function version(docker: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  try {
    const { stdout } = await run(docker, ['compose', 'version', '--short'], { env, timeoutMs: 20_000 });
    return /^v?2\./.test(stdout.trim()) ? stdout.trim() : undefined;
  } catch {
    return undefined;
  }
}

async function unpack(cacheDir: string): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'platform-compose-v2-'));
  try {
    for (const d of ['lists/partial', 'cache/archives/partial'])
      mkdirSync(join(work, d), { recursive: true });
    writeFileSync(join(work, 'sources.list'), `deb http://deb.debian.org/debian ${SUITE} main\n`);
    const apt = [
      '-o',
      `Dir::Etc::sourcelist=${join(work, 'sources.list')}`,
      '-o',
      'Dir::Etc::sourceparts=-',
      '-o',
      `Dir::State::Lists=${join(work, 'lists')}`,
      '-o',
      `Dir::Cache=${join(work, 'cache')}`,
      '-o',
      'APT::Sandbox::User=root',
    ];
    await run('apt-get', [...apt, 'update'], { timeoutMs: 300_000 });
    await run('apt-get', [...apt, 'download', ...PACKAGES], { cwd: work, timeoutMs: 300_000 });
    const root = join(cacheDir, 'root');
    rmSync(root, { recursive: true, force: true });
    mkdirSync(root, { recursive: true });
    for (const deb of readdirSync(work).filter((f) => f.endsWith('.deb')))
      await run('dpkg-deb', ['-x', join(work, deb), root]);
    const plugins = join(cacheDir, 'config', 'cli-plugins');
    rmSync(join(cacheDir, 'config'), { recursive: true, force: true });
    mkdirSync(plugins, { recursive: true });
    for (const p of ['docker-compose', 'docker-buildx'])
      symlinkSync(join(root, 'usr/libexec/docker/cli-plugins', p), join(plugins, p));
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

export async function ensureComposeV2(cfg: ContainerSuiteConfig): Promise<ComposeV2> {
  const docker = 'docker';
  const own = await version(docker, process.env);
  if (own) return { docker, env: process.env, version: own, source: 'the docker CLI’s own plugin' };
  const env = { ...process.env, DOCKER_CONFIG: join(cfg.composeV2Dir, 'config') };
  let v = await version(docker, env);
  if (!v) {
    if (process.getuid?.() !== 0) throw new Error('no Compose v2 plugin, and unpacking one needs root');
    if (!existsSync('/usr/bin/apt-get')) throw new Error('no Compose v2 plugin and no apt-get to fetch one');
    await unpack(cfg.composeV2Dir);
    v = await version(docker, env);
    if (!v)
      throw new Error(`Debian ${SUITE}'s docker-compose, unpacked in ${cfg.composeV2Dir}, does not run`);
  }
  return {
    docker,
    env,
    version: v,
    source: `Debian ${SUITE}'s docker-compose, unpacked in ${cfg.composeV2Dir}`,
  };
}
