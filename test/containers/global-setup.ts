// The container suite's one stack: engine (dockerd started when silent), images (base images reused while
// their recipe is unchanged), the compose project up, and — whatever happens in the tests — down again.
import { spawnSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { loadContainerSuiteConfig } from './config.ts';
import { ensureEngine } from './docker.ts';
import { buildImages } from './images.ts';
import { removeAbandonedStacks, type StackInfo, stackDown, stackUp } from './stack.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    stack: StackInfo;
  }
}

const say = (line: string) => process.stdout.write(`[containers] ${line}\n`);

export async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = performance.now();
  const cfg = loadContainerSuiteConfig();
  const engine = await ensureEngine(cfg);
  say(`Docker Engine ${engine}; compose: ${cfg.compose}; docker CLI: ${cfg.docker}`);
  const abandoned = await removeAbandonedStacks(cfg);
  if (abandoned.length > 0) say(`removed stacks left by dead runs: ${abandoned.join(', ')}`);
  const build = await buildImages(cfg);
  say(
    `images: ${Object.entries(build.seconds)
      .map(([k, v]) => `${k} ${v === 0 ? 'reused' : `${v} s`}`)
      .join(', ')}`,
  );
  say(`image size: ${build.images.platform} ${(build.platformBytes / 1e6).toFixed(1)} MB`);
  const up = await stackUp(cfg, build.images);
  const { info } = up;
  say(
    `stack ${info.project} up at ${info.baseUrl}; cold start (up → proxied health 200): ${up.coldStartSeconds} s`,
  );
  project.provide('stack', info);

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
  return async () => {
    await teardown();
    say(`container suite: ${((performance.now() - started) / 1000).toFixed(1)} s in all`);
  };
}
