#!/usr/bin/env node
// The sources are TypeScript run by Node's type stripping (no build step).
// Node >= 22.18 / 23.6 strips types by default; 22.12–22.17 needs the flag, so re-exec once with it.
import { spawnSync } from 'node:child_process';

if (process.features.typescript) {
  await import('../cli/main.ts');
} else {
  const r = spawnSync(
    process.execPath,
    ['--experimental-strip-types', '--no-warnings', ...process.argv.slice(1)],
    {
      stdio: 'inherit',
    },
  );
  process.exit(r.status ?? 1);
}
