// Every image the deployment needs, made without a registry: a Debian root from debootstrap (Debian's packages
// only) imported as the base image, and images for Node 24, Postgres, Redis, Caddy and Prometheus built FROM it
// with apt-get (and, for Node, the Node 24 binary running this command — `make deps` takes it from the npm
// registry's node-linux-<arch> package — plus npm from the npm registry). The project's own image is then
// built FROM the Node one (deploy/Dockerfile's NODE_IMAGE). Every image is tagged with a hash of its recipe and
// kept: a later run whose recipe is unchanged reuses it. Used by `make images` (deploy/images/main.ts) and by
// the container suite (test/containers/), which runs the same recipe.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processEnv } from '../../cli/config.ts';

const IMAGES_DIR = fileURLToPath(new URL('./', import.meta.url));
export const REPO_DIR = fileURLToPath(new URL('../../', import.meta.url));

const DEBIAN = { suite: 'bookworm', variant: 'minbase', mirror: 'http://deb.debian.org/debian' };
// npm for the Node image (deploy/Dockerfile's `npm ci` runs it); the official image bundles its own.
const NPM_VERSION = '11.6.2';

export interface ImageBuildOptions {
  /** The docker CLI. */
  docker: string;
  /** A PEM bundle of the CAs the host trusts, copied into the Node image (a network that re-signs TLS). */
  caFile?: string;
  /** Tag prefix of the images made here (`<prefix>/debian:…`, `<prefix>/node:…`). */
  prefix?: string;
}

/** The images compose and the Swarm stack run besides the project image, by their deploy/.env variable. */
export interface BaseImages {
  node: string;
  postgres: string;
  redis: string;
  caddy: string;
  prometheus: string;
}

export interface BuildReport {
  images: BaseImages;
  /** Seconds per step; a reused image shows as 0. */
  seconds: Record<string, number>;
}

export function run(
  file: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      {
        // Unset: the child inherits this process's environment.
        env: opts.env,
        timeout: opts.timeoutMs ?? 600_000,
        maxBuffer: 64 * 1024 * 1024,
        killSignal: 'SIGKILL',
      },
      (err, stdout, stderr) => {
        if (err) {
          const code = (err as { code?: number | string }).code ?? null;
          reject(
            new Error(
              `${file} ${args.slice(0, 3).join(' ')} exited ${code}: ${(stderr || stdout).trim().slice(-2000)}`,
            ),
          );
        } else resolve({ stdout, stderr });
      },
    );
  });
}

const hash = (...parts: Array<string | Buffer>): string => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex').slice(0, 12);
};

async function exists(docker: string, image: string): Promise<boolean> {
  try {
    await run(docker, ['image', 'inspect', '--format', '{{.Id}}', image], { timeoutMs: 30_000 });
    return true;
  } catch {
    return false;
  }
}

export const buildEnv = (): NodeJS.ProcessEnv => ({ ...processEnv(), DOCKER_BUILDKIT: '1' });

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

async function baseImage(
  o: Required<Pick<ImageBuildOptions, 'docker' | 'prefix'>>,
  seconds: Record<string, number>,
) {
  const tag = `${o.prefix}/debian:${DEBIAN.suite}-${hash(JSON.stringify(DEBIAN))}`;
  if (await exists(o.docker, tag)) {
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
      await run('sh', ['-c', `tar -C "${root}" -c . | "${o.docker}" import - "${tag}"`], {
        timeoutMs: 600_000,
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
    return tag;
  });
}

/** One image from deploy/images/<name>.Dockerfile, built when its tag is missing. */
async function fromRecipe(
  o: Required<Pick<ImageBuildOptions, 'docker' | 'prefix'>>,
  seconds: Record<string, number>,
  r: {
    name: string;
    base: string;
    context?: string;
    files?: string[];
    buildArgs?: Record<string, string>;
    salt?: string;
  },
): Promise<string> {
  const dockerfile = join(IMAGES_DIR, `${r.name}.Dockerfile`);
  const inputs = [readFileSync(dockerfile), r.base, JSON.stringify(r.buildArgs ?? {}), r.salt ?? ''];
  for (const f of r.files ?? []) inputs.push(readFileSync(join(IMAGES_DIR, f)));
  const tag = `${o.prefix}/${r.name}:${hash(...inputs)}`;
  if (await exists(o.docker, tag)) {
    seconds[r.name] = 0;
    return tag;
  }
  await timed(seconds, r.name, () =>
    run(
      o.docker,
      [
        'build',
        '-q',
        '-f',
        dockerfile,
        '--build-arg',
        `BASE_IMAGE=${r.base}`,
        ...Object.entries(r.buildArgs ?? {}).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]),
        '-t',
        tag,
        r.context ?? IMAGES_DIR,
      ],
      { env: buildEnv(), timeoutMs: 900_000 },
    ),
  );
  return tag;
}

/** The Node image: the Node binary running this and the host's trusted CAs, in a build context of their own. */
async function nodeImage(
  o: Required<Pick<ImageBuildOptions, 'docker' | 'prefix'>> & { caFile?: string },
  seconds: Record<string, number>,
  base: string,
): Promise<string> {
  const context = mkdtempSync(join(tmpdir(), 'platform-node-image-'));
  try {
    copyFileSync(process.execPath, join(context, 'node'));
    const ca = o.caFile ? readFileSync(o.caFile) : Buffer.alloc(0);
    copyFileSync(o.caFile ?? '/dev/null', join(context, 'ca-certificates.crt'));
    return await fromRecipe(o, seconds, {
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

/** Every base image the deployment runs, each reused while its recipe is unchanged. */
export async function buildBaseImages(opts: ImageBuildOptions): Promise<BuildReport> {
  const o = { docker: opts.docker, prefix: opts.prefix ?? 'platform-base', caFile: opts.caFile };
  const seconds: Record<string, number> = {};
  const base = await baseImage(o, seconds);
  // Two builds at a time: apt-get spends much of its time waiting on the network.
  const [node, postgres] = await Promise.all([
    nodeImage(o, seconds, base),
    fromRecipe(o, seconds, { name: 'postgres', base, files: ['postgres-entrypoint.sh'] }),
  ]);
  const [redis, caddy] = await Promise.all([
    fromRecipe(o, seconds, { name: 'redis', base }),
    fromRecipe(o, seconds, { name: 'caddy', base }),
  ]);
  const prometheus = await fromRecipe(o, seconds, { name: 'prometheus', base });
  return { images: { node, postgres, redis, caddy, prometheus }, seconds };
}

/** deploy/.env's lines naming the images (compose builds PLATFORM_IMAGE FROM NODE_IMAGE when it is missing). */
export function envLines(images: BaseImages, platformImage: string): string {
  return [
    `NODE_IMAGE=${images.node}`,
    `PLATFORM_IMAGE=${platformImage}`,
    `POSTGRES_IMAGE=${images.postgres}`,
    `REDIS_IMAGE=${images.redis}`,
    `CADDY_IMAGE=${images.caddy}`,
    `PROMETHEUS_IMAGE=${images.prometheus}`,
  ].join('\n');
}
