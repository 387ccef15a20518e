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
    reporters: ['default'],
  },
});
