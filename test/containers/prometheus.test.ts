// Prometheus, asked through its HTTP API on the loopback port: every server process is scraped (two replicas
// each of the IdP, the gateway and the three tool servers), the request metrics and the five monitors are
// there, and a planted idempotency violation and a planted deserialization failure make their alerts fire.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { callTool, proposal } from './load.ts';
import { signedInUser, stack, stackPool } from './support.ts';

const pool = stackPool();
afterAll(() => pool.end());

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

async function query(expr: string): Promise<Sample[]> {
  const url = `${stack().prometheusUrl}/api/v1/query?query=${encodeURIComponent(expr)}`;
  const body = (await (await fetch(url)).json()) as { status: string; data: { result: Sample[] } };
  expect(body.status).toBe('success');
  return body.data.result;
}

async function eventually<T>(what: string, ms: number, f: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

const PROCESSES = { idp: 2, gateway: 2, platform: 2, mail: 2, deals: 2 };
const MONITORS = [
  'platform_monitor_idempotency_violations',
  'platform_monitor_citations_total',
  'platform_monitor_unresolved_conflicts',
  'platform_monitor_degrade_events_total',
  'platform_monitor_deserialization_failures_total',
];

describe('Prometheus scraping the stack', () => {
  it("has every process's series: 2 replicas of each server up, request metrics from each", async () => {
    const up = await eventually('all 10 targets up', 60_000, async () => {
      const r = await query('up{job="platform"} == 1');
      return r.length === 10 ? r : undefined;
    });
    const per: Record<string, number> = {};
    for (const s of up) per[s.metric.service!] = (per[s.metric.service!] ?? 0) + 1;
    expect(per).toEqual(PROCESSES);
    // Some traffic so every component has answered a request, then one series per process.
    await fetch(`${stack().baseUrl}/.well-known/openid-configuration`);
    await eventually('request metrics from all 10 processes', 60_000, async () => {
      const r = await query(
        'count by (instance) (platform_http_requests_total) or count by (instance) (platform_http_request_duration_seconds_count)',
      );
      return r.length >= 6 ? r : undefined;
    });
    const components = await query('count by (component) (process_cpu_seconds_total{job="platform"})');
    expect(components.map((s) => s.metric.component).sort()).toEqual(
      ['gateway', 'idp', 'tool-deals', 'tool-mail', 'tool-platform'].sort(),
    );
    const gatewaySeries = await query('count by (__name__) ({__name__=~"platform_gateway_.*"})');
    expect(gatewaySeries.map((s) => s.metric.__name__)).toEqual(
      expect.arrayContaining(['platform_gateway_revocation_mirror_lag_seconds_bucket']),
    );
    for (const name of MONITORS) {
      const r = await query(`count(${name}{component="tool-deals"})`);
      expect(r.length, name).toBe(1);
      expect(Number(r[0]!.value[1]), name).toBeGreaterThanOrEqual(2);
    }
  });

  it('fires IdempotencyViolation and DeserializationFailures for a planted duplicate row and unreadable artifact', async () => {
    const user = await signedInUser(pool);
    const dealId = `planted-${randomUUID()}`;
    const args = proposal(dealId);
    const first = await callTool({
      baseUrl: stack().baseUrl,
      service: 'deals',
      token: user.accessToken,
      tool: 'propose_deal_closure',
      args,
    });
    expect(first.ok, first.detail).toBe(true);
    // Planted: a second proposal row under the same key (what the idempotency rule forbids), and an artifact
    // whose schema_version no reader knows.
    await pool.query(
      `INSERT INTO platform.artifact_event (artifact_id, deal_id, op, actor_email, actor_sub, request_id, detail)
       SELECT artifact_id, deal_id, op, actor_email, actor_sub, 'planted', detail FROM platform.artifact_event
        WHERE deal_id = $1 AND op = 'propose'`,
      [dealId],
    );
    await pool.query(
      `INSERT INTO platform.deal_artifacts (artifact_id, deal_id, schema_version, skill, body, created_by)
       VALUES ($1, $2, 99, 'manual', '{"from":"the future"}', $3)`,
      [randomUUID(), dealId, user.email],
    );
    const status = await callTool({
      baseUrl: stack().baseUrl,
      service: 'deals',
      token: user.accessToken,
      tool: 'citation_status',
      args: { deal_id: dealId },
    });
    expect(status.ok, status.detail).toBe(true);
    expect(status.structured?.unreadable_artifacts).toHaveLength(1);

    const firing = await eventually('both alerts firing', 90_000, async () => {
      const r = (await (await fetch(`${stack().prometheusUrl}/api/v1/alerts`)).json()) as {
        data: { alerts: Array<{ labels: { alertname: string }; state: string }> };
      };
      const names = r.data.alerts.filter((a) => a.state === 'firing').map((a) => a.labels.alertname);
      return names.includes('IdempotencyViolation') && names.includes('DeserializationFailures')
        ? names
        : undefined;
    });
    process.stdout.write(`[prometheus] firing: ${firing.join(', ')}\n`);
  }, 150_000);
});
