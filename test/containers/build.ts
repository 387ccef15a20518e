// The project image `make images` built (images.ts), checked against the other ways docs/deploy.md builds it:
// `docker-compose build` (Debian's 1.29, the legacy builder) and `docker compose build` (Compose v2, BuildKit)
// make the same image under a throwaway tag; then the registry-less file path (`docker save` here, `docker
// load` on the target) with make images' own image, after which `up` runs that image id and builds nothing.
import { join } from 'node:path';
import type { ComposeV2 } from './compose-v2.ts';
import type { ContainerSuiteConfig } from './config.ts';
import { run } from './docker.ts';
import { timed } from './images.ts';
import { compose, DEPLOY_DIR, type StackInfo } from './stack.ts';

/**
 * The image's content and its run settings: a hash of every file under /app but REVISION (names, modes, bytes) and the
 * config fields a builder sets (user, entrypoint, command, health check, environment, ports, working dir).
 */
async function fingerprint(cfg: ContainerSuiteConfig, image: string): Promise<string> {
  const { stdout: files } = await run(cfg.docker, [
    'run',
    '--rm',
    '--network',
    'none',
    '--entrypoint',
    'sh',
    image,
    '-c',
    // ./REVISION is the commit make images passes (its release labels); a compose build has none: `unknown`.
    "cd /app && find . -type f ! -path ./REVISION -printf '%p %m\\n' | LC_ALL=C sort | sha256sum && find . -type f ! -path ./REVISION -print0 | LC_ALL=C sort -z | xargs -0 cat | sha256sum",
  ]);
  const { stdout: config } = await run(cfg.docker, [
    'image',
    'inspect',
    '--format',
    '{{json .Config.User}} {{json .Config.Entrypoint}} {{json .Config.Cmd}} {{json .Config.Healthcheck}} {{json .Config.Env}} {{json .Config.ExposedPorts}} {{json .Config.WorkingDir}}',
    image,
  ]);
  return `${files.replace(/\s+-\s*/g, ' ').trim()}\n${config.trim()}`;
}

export interface PlatformCheck {
  seconds: Record<string, number>;
  /** The image's size in bytes. */
  bytes: number;
  /** The image id `docker load` gave back: make images' own (the one `up` must run). */
  loadedId: string;
}

const imageId = async (cfg: ContainerSuiteConfig, image: string) =>
  (await run(cfg.docker, ['image', 'inspect', '--format', '{{.Id}}', image])).stdout.trim();

export async function checkPlatform(
  cfg: ContainerSuiteConfig,
  v2: ComposeV2,
  info: StackInfo,
  builtId: string,
): Promise<PlatformCheck> {
  const seconds: Record<string, number> = {};
  const image = info.images.platform;
  const made = await fingerprint(cfg, image);
  // The compose builds go to a tag of their own (the shell's PLATFORM_IMAGE wins over the .env's, in 1.29 as
  // in v2), so the image make images named in the .env stays the one the stack runs.
  const checkTag = `${image}-compose-check`;
  // An operator's default environment: no BuildKit switch, so docker-compose 1.29 uses the legacy builder.
  const legacyEnv: NodeJS.ProcessEnv = { ...process.env, PLATFORM_IMAGE: checkTag };
  delete legacyEnv.DOCKER_BUILDKIT;
  delete legacyEnv.COMPOSE_DOCKER_CLI_BUILD;
  await timed(seconds, 'docker-compose 1.29 build', () => compose(cfg, info, ['build'], 900_000, legacyEnv));
  const legacy = await fingerprint(cfg, checkTag);
  await timed(seconds, `Compose ${v2.version} build`, () =>
    run(v2.docker, ['compose', ...info.composeArgs, 'build'], {
      cwd: DEPLOY_DIR,
      env: { ...v2.env, PLATFORM_IMAGE: checkTag },
      timeoutMs: 900_000,
    }),
  );
  // Compose v2 reads the trial's .env as 1.29 does: COMPOSE_PROFILES=trial adds the sign-in service.
  const { stdout: services } = await run(
    v2.docker,
    ['compose', ...info.composeArgs, 'config', '--services'],
    {
      cwd: DEPLOY_DIR,
      env: v2.env,
    },
  );
  if (!services.split('\n').includes('signin'))
    throw new Error(`Compose v2 did not enable the trial profile: ${services.trim().split('\n').join(', ')}`);
  const buildkit = await fingerprint(cfg, checkTag);
  await run(cfg.docker, ['rmi', checkTag]);
  if (legacy !== made || buildkit !== made) {
    throw new Error(
      `deploy/Dockerfile made different images: make images\n${made}\n--- docker-compose 1.29 ---\n${legacy}\n--- Compose v2 ---\n${buildkit}`,
    );
  }
  if ((await imageId(cfg, image)) !== builtId)
    throw new Error(`${image} is no longer the image make images built (${builtId})`);
  // Offline: saved to a file, the tag removed as on a host that never had it, loaded back.
  const tar = join(info.workDir, 'platform-image.tar');
  const loadedId = await timed(seconds, 'docker save + rmi + load', async () => {
    await run(cfg.docker, ['save', '-o', tar, image], { timeoutMs: 300_000 });
    await run(cfg.docker, ['rmi', image]);
    await run(cfg.docker, ['load', '-i', tar], { timeoutMs: 300_000 });
    await run('rm', ['-f', tar]);
    return imageId(cfg, image);
  });
  if (loadedId !== builtId)
    throw new Error(`docker load gave ${loadedId}, not the image make images built (${builtId})`);
  const { stdout } = await run(cfg.docker, ['image', 'inspect', '--format', '{{.Size}}', image]);
  return { seconds, bytes: Number(stdout.trim()), loadedId };
}
