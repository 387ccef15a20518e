import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Their own runs: the container suite on a Docker Engine (test/containers/vitest.config.ts, make test runs
    // both) and the failover suite (test/ha/vitest.config.ts, make test-ha).
    exclude: ['test/containers/**', 'test/ha/**', 'node_modules/**'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two files at a time whatever the core count (vitest's default is cores − 1: one on a 2-core machine). The
    // files mostly wait on real processes, Postgres and Redis; on the 2-core CI machine the suite took 1236 s
    // one at a time and 744 s two at a time, every test passing.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
