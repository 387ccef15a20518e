// The images the suite runs, made without a registry: a Debian root from debootstrap imported as the base
// image, and the stand-ins for the official images built FROM it (Node, Postgres, Redis, Caddy, Prometheus).
// Every one is tagged with a hash of its recipe and kept: a later run whose recipe is unchanged reuses it. The
// project's own image is built by compose, as the documentation says (build.ts), with NODE_IMAGE pointing at
// the Node stand-in.
import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ContainerSuiteConfig } from './config.ts';
import { run } from './docker.ts';

const IMAGES_DIR = fileURLToPath(new URL('./images/', import.meta.url));
export const REPO_DIR = fileURLToPath(new URL('../../', import.meta.url));

const DEBIAN = { suite: 'bookworm', variant: 'minbase', mirror: 'http://deb.debian.org/debian' };
// npm for the Node stand-in (deploy/Dockerfile's `npm ci` runs it); the official image bundles its own.
const NPM_VERSION = '11.6.2';

export interface StackImages {
  platform: string;
  node: string;
  postgres: string;
  redis: string;
  caddy: string;
  prometheus: string;
}

export interface BuildReport {
  images: Omit<StackImages, 'platform'>;
  /** Seconds per step; a reused image shows as 0. */
  seconds: Record<string, number>;
}

const hash = (...parts: Array<string | Buffer>): string => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex').slice(0, 12);
};

async function exists(cfg: ContainerSuiteConfig, image: string): Promise<boolean> {
  try {
    await run(cfg.docker, ['image', 'inspect', '--format', '{{.Id}}', image], { timeoutMs: 30_000 });
    return true;
  } catch {
    return false;
  }
}

const buildEnv = (): NodeJS.ProcessEnv => ({ ...process.env, DOCKER_BUILDKIT: '1' });

export async function timed<T>(
  seconds: Record<string, number>,
  step: string,
  f: () => Promise<T>,
): Promise<T> {
  const t0 = performance.now();
  try {
    return await f();
  } finally {
    seconds[step] = Math.round((performance.now() - t0) / 100) / 10;
  }
}

async function baseImage(cfg: ContainerSuiteConfig, seconds: Record<string, number>): Promise<string> {
  const tag = `platform-test/debian:${DEBIAN.suite}-${hash(JSON.stringify(DEBIAN))}`;
  if (await exists(cfg, tag)) {
    seconds.debian = 0;
    return tag;
  }
  return timed(seconds, 'debian', async () => {
    if (process.getuid?.() !== 0) throw new Error(`image ${tag} is missing and debootstrap needs root`);
    const root = mkdtempSync(join(tmpdir(), 'platform-debootstrap-'));
    try {
      await run('debootstrap', [`--variant=${DEBIAN.variant}`, DEBIAN.suite, root, DEBIAN.mirror], {
        timeoutMs: 900_000,
      });
      // The package lists and downloaded .debs are not needed in the image (every recipe runs apt-get update).
      await run('sh', ['-c', `rm -rf "${root}"/var/cache/apt/archives/*.deb "${root}"/var/lib/apt/lists/*`]);
      await run('sh', ['-c', `tar -C "${root}" -c . | "${cfg.docker}" import - "${tag}"`], {
        timeoutMs: 600_000,
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
    return tag;
  });
}

/** One stand-in image from test/containers/images/<name>.Dockerfile, built when its tag is missing. */
async function standIn(
  cfg: ContainerSuiteConfig,
  seconds: Record<string, number>,
  o: {
    name: string;
    base: string;
    context?: string;
    files?: string[];
    buildArgs?: Record<string, string>;
    salt?: string;
  },
): Promise<string> {
  const dockerfile = join(IMAGES_DIR, `${o.name}.Dockerfile`);
  const inputs = [readFileSync(dockerfile), o.base, JSON.stringify(o.buildArgs ?? {}), o.salt ?? ''];
  for (const f of o.files ?? []) inputs.push(readFileSync(join(IMAGES_DIR, f)));
  const tag = `platform-test/${o.name}:${hash(...inputs)}`;
  if (await exists(cfg, tag)) {
    seconds[o.name] = 0;
    return tag;
  }
  await timed(seconds, o.name, () =>
    run(
      cfg.docker,
      [
        'build',
        '-q',
        '-f',
        dockerfile,
        '--build-arg',
        `BASE_IMAGE=${o.base}`,
        ...Object.entries(o.buildArgs ?? {}).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]),
        '-t',
        tag,
        o.context ?? IMAGES_DIR,
      ],
      { env: buildEnv(), timeoutMs: 900_000 },
    ),
  );
  return tag;
}

/** The Node stand-in: the Node binary running this suite and the host's trusted CAs, in a context of their own. */
async function nodeImage(
  cfg: ContainerSuiteConfig,
  seconds: Record<string, number>,
  base: string,
): Promise<string> {
  const context = mkdtempSync(join(tmpdir(), 'platform-node-image-'));
  try {
    copyFileSync(process.execPath, join(context, 'node'));
    const ca = cfg.caFile ? readFileSync(cfg.caFile) : Buffer.alloc(0);
    copyFileSync(cfg.caFile ?? '/dev/null', join(context, 'ca-certificates.crt'));
    return await standIn(cfg, seconds, {
      name: 'node',
      base,
      context,
      buildArgs: { NPM_VERSION },
      // The binary itself is 100+ MB; its version names it well enough, the CA bundle is hashed whole.
      salt: `${process.version}\0${hash(ca)}`,
    });
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}

/** The images the stack runs but does not build itself; the project image is built by compose (build.ts). */
export type BaseImages = Omit<StackImages, 'platform'>;

/** Every base image the stack needs, each reused while its recipe is unchanged. */
export async function buildImages(cfg: ContainerSuiteConfig): Promise<BuildReport> {
  const seconds: Record<string, number> = {};
  const base = await baseImage(cfg, seconds);
  // Two builds at a time: this machine has two cores, and apt-get spends much of it waiting on the network.
  const [node, postgres] = await Promise.all([
    nodeImage(cfg, seconds, base),
    standIn(cfg, seconds, { name: 'postgres', base, files: ['postgres-entrypoint.sh'] }),
  ]);
  const [redis, caddy] = await Promise.all([
    standIn(cfg, seconds, { name: 'redis', base }),
    standIn(cfg, seconds, { name: 'caddy', base }),
  ]);
  const prometheus = await standIn(cfg, seconds, { name: 'prometheus', base });
  return { images: { node, postgres, redis, caddy, prometheus }, seconds };
}
