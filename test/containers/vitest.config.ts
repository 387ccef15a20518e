import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

// Least disruptive first: the doctor, the isolation attacks and Prometheus on the fresh stack, then the fault
// runs, then the outages of Redis and Postgres.
const ORDER = ['doctor', 'isolation', 'prometheus', 'faults', 'outages'];
const rank = (s: TestSpecification) => {
  const i = ORDER.findIndex((n) => s.moduleId.endsWith(`/${n}.test.ts`));
  return i === -1 ? ORDER.length : i;
};
class InOrder extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return [...files].sort((a, b) => rank(a) - rank(b));
  }
}

// The container suite (`make test` runs it before the rest): one compose stack for all its files, which run
// one after another because the fault runs stop and kill the containers the other files use.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/containers/**/*.test.ts'],
    globalSetup: ['test/containers/global-setup.ts'],
    fileParallelism: false,
    sequence: { sequencer: InOrder },
    testTimeout: 180_000,
    hookTimeout: 180_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
