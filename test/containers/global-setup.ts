// The container suite's one stack, deployed the way docs/deploy.md says: engine (dockerd started when silent),
// base images (reused while their recipe is unchanged), a trial's deploy/.env from `platform trial-env`, the
// project image built by docker-compose 1.29 and by Compose v2 (the same image), saved and loaded as on an
// offline host, `up -d` — and whatever happens in the tests, down again.
import { spawnSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { buildPlatform } from './build.ts';
import { ensureComposeV2 } from './compose-v2.ts';
import { loadContainerSuiteConfig } from './config.ts';
import { ensureEngine, run } from './docker.ts';
import { buildImages } from './images.ts';
import { prepareStack, removeAbandonedStacks, type StackInfo, stackDown, stackUp } from './stack.ts';

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
  const base = await buildImages(cfg);
  say(`base images: ${list(base.seconds)}`);
  const { info } = await prepareStack(cfg, base.images);

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
    const built = await buildPlatform(cfg, v2, info);
    say(`project image: ${list(built.seconds)}; the same image from both builders`);
    say(`image size: ${info.images.platform} ${(built.bytes / 1e6).toFixed(1)} MB`);
    const up = await stackUp(cfg, info);
    // `up` ran the loaded image: every server container runs it, nothing was built in its place.
    const ids = (
      await run(cfg.docker, ['ps', '-q', '--filter', `label=com.docker.compose.project=${info.project}`])
    ).stdout
      .split('\n')
      .filter(Boolean);
    const { stdout } = await run(cfg.docker, ['inspect', '--format', '{{.Config.Image}} {{.Image}}', ...ids]);
    const platform = stdout.split('\n').filter((l) => l.startsWith(`${info.images.platform} `));
    if (platform.length === 0 || platform.some((l) => !l.endsWith(` ${built.loadedId}`)))
      throw new Error(`up did not run the loaded image ${built.loadedId}: ${platform.join('; ')}`);
    say(
      `stack ${info.project} up at ${info.baseUrl}; cold start (up → proxied health 200): ${up.coldStartSeconds} s`,
    );
  } catch (err) {
    await teardown().catch(() => {});
    throw err;
  }
  project.provide('stack', info);
  return async () => {
    await teardown();
    say(`container suite: ${((performance.now() - started) / 1000).toFixed(1)} s in all`);
  };
}
