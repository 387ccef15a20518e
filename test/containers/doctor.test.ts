// `platform doctor` against the running stack, from the host: every check it can run, no FAIL.
import { execFile } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { PLATFORM_BIN } from '../helpers/processes.ts';
import { signedInUser, stack, stackPool } from './support.ts';

const pool = stackPool();
afterAll(() => pool.end());

function doctor(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [PLATFORM_BIN, 'doctor', ...args],
      { env: { ...process.env, ...env }, timeout: 120_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

describe('platform doctor against the compose stack', () => {
  it('passes every check it runs, with a token (#14 included)', async () => {
    const user = await signedInUser(pool);
    const r = await doctor(['--base-url', stack().baseUrl], { PLATFORM_TOKEN: user.accessToken });
    process.stdout.write(`${r.out}\n`);
    expect(r.out).not.toMatch(/^FAIL/m);
    expect(r.out).toMatch(/^PASS\s+#14\s+deals/m);
    expect(r.code).toBe(0);
  });
});
