// The alert rules Prometheus loads (deploy/prometheus/alerts.yaml), checked by Prometheus's own promtool:
// valid rules, and each monitor's alert firing on a planted spike (test/deploy/alerts.rules-test.yaml).
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

function promtool(args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile('promtool', args, { cwd: REPO, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

describe('deploy/prometheus/alerts.yaml', () => {
  it('passes promtool check rules, with a rule for each of the five monitors', async () => {
    const r = await promtool(['check', 'rules', 'deploy/prometheus/alerts.yaml']);
    expect(r.out).toContain('SUCCESS');
    expect(r.code).toBe(0);
    const text = await import('node:fs/promises').then((fs) =>
      fs.readFile(`${REPO}/deploy/prometheus/alerts.yaml`, 'utf8'),
    );
    for (const series of [
      'platform_monitor_idempotency_violations',
      'platform_monitor_citations_total',
      'platform_monitor_unresolved_conflicts',
      'platform_monitor_degrade_events_total',
      'platform_monitor_deserialization_failures_total',
    ])
      expect(text).toContain(series);
  });

  it('fires on planted spikes and stays quiet before them (promtool test rules)', async () => {
    const r = await promtool(['test', 'rules', 'test/deploy/alerts.rules-test.yaml']);
    expect(r.out).toContain('SUCCESS');
    expect(r.code).toBe(0);
  });
});
