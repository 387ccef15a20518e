// The project image, built the way docs/deploy.md says: `docker-compose build` (Debian's 1.29, the legacy
// builder) and `docker compose build` (Compose v2, BuildKit), the same image from both; then the offline path
// (`docker save` here, `docker load` on the target), after which `up` runs the loaded image and builds nothing.
import { join } from 'node:path';
import type { ComposeV2 } from './compose-v2.ts';
import type { ContainerSuiteConfig } from './config.ts';
import { run } from './docker.ts';
import { timed } from './images.ts';
import { compose, DEPLOY_DIR, type StackInfo } from './stack.ts';

export interface PlatformBuild {
  seconds: Record<string, number>;
  /** The image's size in bytes. */
  bytes: number;
  /** The image id `docker load` gave back (the one `up` must run). */
  loadedId: string;
  /** The compared content: what both builders put under /app, and the image's run settings. */
  fingerprint: string;
}

/**
 * The image's content and its run settings: a hash of every file under /app (names, modes, bytes) and the
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
    "cd /app && find . -type f -printf '%p %m\\n' | LC_ALL=C sort | sha256sum && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | sha256sum",
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

export async function buildPlatform(
  cfg: ContainerSuiteConfig,
  v2: ComposeV2,
  info: StackInfo,
): Promise<PlatformBuild> {
  const seconds: Record<string, number> = {};
  const image = info.images.platform;
  // An operator's default environment: no BuildKit switch, so docker-compose 1.29 uses the legacy builder.
  const legacyEnv = { ...process.env };
  delete legacyEnv.DOCKER_BUILDKIT;
  delete legacyEnv.COMPOSE_DOCKER_CLI_BUILD;
  await timed(seconds, 'docker-compose 1.29 build', () => compose(cfg, info, ['build'], 900_000, legacyEnv));
  const legacy = await fingerprint(cfg, image);
  await run(cfg.docker, ['tag', image, `${image}-legacy`]);
  await timed(seconds, `Compose ${v2.version} build`, () =>
    run(v2.docker, ['compose', ...info.composeArgs, 'build'], {
      cwd: DEPLOY_DIR,
      env: v2.env,
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
  const buildkit = await fingerprint(cfg, image);
  await run(cfg.docker, ['rmi', `${image}-legacy`]);
  if (legacy !== buildkit) {
    throw new Error(
      `the legacy builder and BuildKit made different images from deploy/Dockerfile:\n${legacy}\n--- vs ---\n${buildkit}`,
    );
  }
  // Offline: saved to a file, the tag removed as on a host that never had it, loaded back.
  const tar = join(info.workDir, 'platform-image.tar');
  const loadedId = await timed(seconds, 'docker save + load', async () => {
    await run(cfg.docker, ['save', '-o', tar, image], { timeoutMs: 300_000 });
    await run(cfg.docker, ['rmi', image]);
    await run(cfg.docker, ['load', '-i', tar], { timeoutMs: 300_000 });
    await run('rm', ['-f', tar]);
    return (await run(cfg.docker, ['image', 'inspect', '--format', '{{.Id}}', image])).stdout.trim();
  });
  const { stdout } = await run(cfg.docker, ['image', 'inspect', '--format', '{{.Size}}', image]);
  return { seconds, bytes: Number(stdout.trim()), loadedId, fingerprint: buildkit };
}
