// The images the suite runs, made as docs/deploy.md § Offline hosts says: the documented command itself,
// `node deploy/images/main.ts` (what `make images` runs), as a child process, with the suite's tag prefix, the
// stack's .env and the stack's project image tag. It builds the base images (a Debian root from debootstrap
// imported as the base image, and the images for Node, Postgres, Redis, Caddy and Prometheus FROM it, tagged
// `platform-test/…` with a hash of their recipe and kept between runs), then the project image FROM the Node
// one, and writes the lines naming them into the .env — which the stack then runs, nothing else.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type BaseImages,
  type BuildReport,
  buildBaseImages,
  REPO_DIR,
  timed,
} from '../../deploy/images/build.ts';
import type { ContainerSuiteConfig } from './config.ts';
import { run } from './docker.ts';

export type { BaseImages, BuildReport };
export { REPO_DIR, timed };

export interface StackImages extends BaseImages {
  platform: string;
}

/** The suite's tag prefix (`platform-test/debian:…`, `platform-test/node:…`). */
export const IMAGE_PREFIX = 'platform-test';

/** Every base image, by the library call (the failover suite's Swarm test; the container suite runs main.ts). */
export function buildImages(cfg: ContainerSuiteConfig): Promise<BuildReport> {
  return buildBaseImages({ docker: cfg.docker, caFile: cfg.caFile, prefix: IMAGE_PREFIX });
}

export interface MadeImages {
  /** The images named in the .env after the command, by their compose variable's role. */
  images: StackImages;
  /** The per-step seconds the command printed (`debian`, `node`, …, `platform`); 0 = reused. */
  seconds: Record<string, number>;
  /** The command's own wall time. */
  wallSeconds: number;
  /** The id of the project image it built (the one every server container must run). */
  platformId: string;
  /** The command line, as run. */
  command: string;
}

/** The `KEY=value` lines of an env file. */
export function readEnvFile(file: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) out.set(m[1]!, m[2]!);
  }
  return out;
}

/**
 * `make images` as the documentation runs it (`make deps container-tools` have run: the suite runs under the
 * Node 24 `make deps` provides, with the Debian packages `make container-tools` installs), writing into the
 * stack's .env. The docker CLI is the suite's, handed over as a user would (DOCKER, which main.ts reads).
 */
export async function makeImages(
  cfg: ContainerSuiteConfig,
  o: { envFile: string; tag: string },
): Promise<MadeImages> {
  const args = [
    join(REPO_DIR, 'deploy/images/main.ts'),
    '--prefix',
    IMAGE_PREFIX,
    '--env-file',
    o.envFile,
    '--tag',
    o.tag,
    // The CA bundle main.ts would take by default, unless the suite was told of another (NODE_EXTRA_CA_CERTS).
    ...(cfg.caFile ? ['--ca-file', cfg.caFile] : []),
  ];
  const t0 = performance.now();
  const { stderr } = await run(process.execPath, args, {
    cwd: REPO_DIR,
    env: { ...process.env, DOCKER: cfg.docker },
    // An empty engine: debootstrap, five images with apt-get, then the project image with `npm ci`.
    timeoutMs: 2_400_000,
  });
  const wallSeconds = Math.round((performance.now() - t0) / 100) / 10;
  // main.ts's report: `images built (seconds: debian 31.2, node 0, …, platform 40.1); <env file> names them:`.
  const m = /images built \(seconds: ([^)]*)\); (\S+) names them/.exec(stderr);
  if (!m || m[2] !== o.envFile)
    throw new Error(`node deploy/images/main.ts did not report writing ${o.envFile}: ${stderr.trim()}`);
  const seconds = Object.fromEntries(
    m[1]!.split(', ').map((s) => {
      const [step, n] = s.split(' ');
      return [step!, Number(n)];
    }),
  );
  const env = readEnvFile(o.envFile);
  const named = (key: string): string => {
    const v = env.get(key);
    if (!v) throw new Error(`node deploy/images/main.ts left no ${key} in ${o.envFile}`);
    return v;
  };
  const images: StackImages = {
    platform: named('PLATFORM_IMAGE'),
    node: named('NODE_IMAGE'),
    postgres: named('POSTGRES_IMAGE'),
    redis: named('REDIS_IMAGE'),
    caddy: named('CADDY_IMAGE'),
    prometheus: named('PROMETHEUS_IMAGE'),
  };
  if (images.platform !== o.tag) throw new Error(`PLATFORM_IMAGE=${images.platform}, not ${o.tag}`);
  for (const [k, v] of Object.entries(images))
    if (k !== 'platform' && !v.startsWith(`${IMAGE_PREFIX}/`))
      throw new Error(`${k}: ${v} is not one of the images built under ${IMAGE_PREFIX}/`);
  const { stdout } = await run(cfg.docker, ['image', 'inspect', '--format', '{{.Id}}', o.tag]);
  return {
    images,
    seconds,
    wallSeconds,
    platformId: stdout.trim(),
    command: `node deploy/images/main.ts ${args.slice(1).join(' ')}`,
  };
}
