// The container suite's one stack, deployed the way docs/deploy.md § Offline hosts says: engine (dockerd started
// when silent), a trial's deploy/.env from `platform trial-env`, `make images` run as the documented command
// (base images reused while their recipe is unchanged, the project image built, their lines written into that
// .env), the same image from docker-compose 1.29 and Compose v2, make images' image saved and loaded as on an
// offline host, `up -d` as shipped (the user's cold start, timed), then down and `up -d` again with the tests'
// 3 s health checks — and whatever happens in the tests, down again.
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import type { TestProject } from 'vitest/node';
import { checkPlatform } from './build.ts';
import { ensureComposeV2 } from './compose-v2.ts';
import { loadContainerSuiteConfig } from './config.ts';
import { ensureEngine, run } from './docker.ts';
import { makeImages } from './images.ts';
import {
  PLATFORM_TAG,
  prepareStack,
  removeAbandonedStacks,
  type StackInfo,
  stackDown,
  stackUp,
} from './stack.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    stack: StackInfo;
  }
}

const say = (line: string) => process.stdout.write(`[containers] ${line}\n`);
const list = (seconds: Record<string, number>) =>
  Object.entries(seconds)
    .map(([k, v]) => `${k} ${v === 0 ? 'reused' : `${v} s`}`)
    .join(', ');

export async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = performance.now();
  const cfg = loadContainerSuiteConfig();
  const engine = await ensureEngine(cfg);
  const v2 = await ensureComposeV2(cfg);
  say(`Docker Engine ${engine}; compose: ${cfg.compose}; docker CLI: ${cfg.docker}`);
  say(`Compose v2: ${v2.version} (${v2.source})`);
  const abandoned = await removeAbandonedStacks(cfg);
  if (abandoned.length > 0) say(`removed stacks left by dead runs: ${abandoned.join(', ')}`);
  const { info } = await prepareStack(cfg);
  let down: Promise<void> | undefined;
  const teardown = () => {
    if (cfg.keepStack) {
      say(`CONTAINER_SUITE_KEEP=1: stack ${info.project} left up (env file ${info.envFile})`);
      return Promise.resolve();
    }
    down ??= stackDown(cfg, info).then(() => {
      say(`stack ${info.project} down`);
    });
    return down;
  };
  // Interrupted runs tear down too (a SIGKILLed one is cleaned up by the next run's removeAbandonedStacks).
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      spawnSync(cfg.compose, [...info.composeArgs, 'down', '-v', '--remove-orphans', '-t', '5'], {
        stdio: 'inherit',
      });
      process.exit(1);
    });
  }
  try {
    const made = await makeImages(cfg, { envFile: info.envFile, tag: PLATFORM_TAG });
    info.images = made.images;
    say(`make images: ${made.command}`);
    say(
      `make images: base images ${list(Object.fromEntries(Object.entries(made.seconds).filter(([k]) => k !== 'platform')))}; project image ${made.seconds.platform} s; ${made.wallSeconds} s in all`,
    );
    const checked = await checkPlatform(cfg, v2, info, made.platformId);
    say(`project image: ${list(checked.seconds)}; the same image from make images and both compose builders`);
    say(`image size: ${info.images.platform} ${(checked.bytes / 1e6).toFixed(1)} MB`);
    // CONTAINER_SUITE_COLD_START=shipped: first the user's `up -d` of the files as shipped (their health checks
    // gate compose's start order), timed; then down with its volumes, and up again with the tests' 3 s health
    // checks (a fault run's restarted container must be healthy in seconds). Off by default: it costs the suite
    // that start and that down (~90 s), which a fresh machine's CI run cannot spare; docs/deploy.md prints what
    // such a run measured.
    let shippedLine: string | undefined;
    if (cfg.shippedColdStart) {
      const shipped = await stackUp(cfg, info, { shippedHealth: true });
      const shippedLoad = loadavg()[0]!.toFixed(1);
      await assertRuns(info, made.platformId);
      const t0 = performance.now();
      await stackDown(cfg, info, { keepWorkDir: true });
      const downSeconds = ((performance.now() - t0) / 1000).toFixed(1);
      shippedLine = `cold start as shipped (30 s health checks): ${shipped.coldStartSeconds} s (load average ${shippedLoad}); down before the tests' up: ${downSeconds} s`;
    }
    const up = await stackUp(cfg, info);
    await assertRuns(info, made.platformId);
    say(
      `stack ${info.project} up at ${info.baseUrl}; cold start (up → proxied health 200): ${up.coldStartSeconds} s (3 s health checks; load average ${loadavg()[0]!.toFixed(1)})`,
    );
    say(
      shippedLine ??
        'cold start as shipped (30 s health checks): not measured (CONTAINER_SUITE_COLD_START=shipped)',
    );
  } catch (err) {
    await teardown().catch(() => {});
    throw err;
  }
  project.provide('stack', info);

  /** `up` ran make images' image: every server container runs its id, nothing was built in its place. */
  async function assertRuns(info: StackInfo, imageId: string): Promise<void> {
    const ids = (
      await run(cfg.docker, ['ps', '-q', '--filter', `label=com.docker.compose.project=${info.project}`])
    ).stdout
      .split('\n')
      .filter(Boolean);
    const { stdout } = await run(cfg.docker, ['inspect', '--format', '{{.Config.Image}} {{.Image}}', ...ids]);
    const lines = stdout.split('\n').filter(Boolean);
    const platform = lines.filter((l) => l.startsWith(`${info.images.platform} `));
    if (platform.length === 0 || platform.some((l) => !l.endsWith(` ${imageId}`)))
      throw new Error(`up did not run the image make images built (${imageId}): ${platform.join('; ')}`);
    // And every other container one of the images make images named in the .env.
    const named = new Set(Object.values(info.images));
    const other = lines.filter((l) => !named.has(l.split(' ')[0]!));
    if (other.length > 0) throw new Error(`up ran images make images did not name: ${other.join('; ')}`);
  }
  return async () => {
    await teardown();
    say(`container suite: ${((performance.now() - started) / 1000).toFixed(1)} s in all`);
  };
}
