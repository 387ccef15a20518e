// `platform doctor` against the running stack, from the host: every check it can run, no FAIL.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderTunnelConfig } from '../../deploy/cloudflared/tunnel-config.ts';
import { PLATFORM_BIN } from '../helpers/processes.ts';
import { REPO_DIR } from './images.ts';
import { allHealthy, cfg, signedInUser, stack, stackPool } from './support.ts';

const pool = stackPool();
// An operator runs doctor against a settled stack: a container still in its first health interval is not a FAIL.
beforeAll(() => allHealthy());
afterAll(() => pool.end());

function doctor(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [PLATFORM_BIN, 'doctor', ...args],
      {
        env: { ...process.env, PLATFORM_DOCTOR_DOCKER: cfg.docker, ...env },
        timeout: 120_000,
        cwd: REPO_DIR,
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

describe('platform doctor against the compose stack', () => {
  it('passes every check it runs, with a token (#14 included)', async () => {
    const user = await signedInUser(pool);
    // The tunnel's ingress rendered for this stack's public host, as an operator renders it for theirs.
    const tunnelConfig = join(stack().workDir, 'cloudflared.yml');
    writeFileSync(
      tunnelConfig,
      renderTunnelConfig({
        host: new URL(stack().baseUrl).hostname,
        tunnelId: '00000000-0000-4000-8000-000000000000',
        services: ['platform', 'mail', 'deals'],
        proxyUrl: 'http://proxy:81',
      }),
    );
    const r = await doctor(
      ['--base-url', stack().baseUrl, '--compose', 'deploy/compose.yaml', '--project', stack().project],
      { PLATFORM_TOKEN: user.accessToken, CLOUDFLARED_CONFIG: tunnelConfig },
    );
    process.stdout.write(`${r.out}\n`);
    expect(r.out).not.toMatch(/^FAIL/m);
    for (const ref of ['#1', '#2', '#3', '#4', '#5', '#6', '#7', '#8', '#9', '#10', '#14', '#15', '#16'])
      expect(r.out, ref).toMatch(new RegExp(`^PASS\\s+${ref}\\s`, 'm'));
    expect(r.out).toMatch(/^PASS\s+#14\s+deals/m);
    expect(r.code).toBe(0);
  });
});
