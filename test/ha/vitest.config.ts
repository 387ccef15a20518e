import { defineConfig } from 'vitest/config';

// The high-availability suite (`make test-ha`, which .ci/run calls after `make test`): real failovers of Redis
// (Sentinel, Cluster) and Postgres, and a Docker Swarm on a private engine. Each file starts its own processes on
// free loopback ports and never touches the shared Postgres, Redis or Docker Engine; files run one after another
// because each one loads both cores.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/ha/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
