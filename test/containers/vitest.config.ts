import { defineConfig } from 'vitest/config';

// The container suite (`make test` runs it before the rest): one compose stack for all its files, which run
// one after another because the fault runs stop and kill the containers the other files use.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/containers/**/*.test.ts'],
    globalSetup: ['test/containers/global-setup.ts'],
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 180_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
