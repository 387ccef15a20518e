// lib/metrics.ts: the metrics listener (its own port, /metrics only), the request instrumentation, and
// METRICS_PORT's validation in a process config.
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../lib/config.ts';
import { drain, listen } from '../../lib/lifecycle.ts';
import { createLogger } from '../../lib/logger.ts';
import { createProcessMetrics, instrument, serveMetrics } from '../../lib/metrics.ts';
import { loadToolConfig } from '../../tools/config.ts';

const log = createLogger({ name: 'metrics-test', level: 'silent' });

describe('request metrics', () => {
  it('counts each answer by route and outcome, served on the metrics port only', async () => {
    const m = createProcessMetrics('test');
    const app = createServer(
      instrument(
        (req, res) => res.writeHead(req.url === '/deals/mcp' ? 200 : 404).end(),
        m.http,
        (req) => (req.url === '/deals/mcp' ? 'deals' : 'other'),
      ),
    );
    const a = await listen(app, 0, '127.0.0.1');
    const metrics = await serveMetrics(m.registry, 0, log, '127.0.0.1');
    try {
      for (const path of ['/deals/mcp', '/deals/mcp', '/x/y/z?q=1'])
        await (await fetch(`http://127.0.0.1:${a.port}${path}`)).text();
      const res = await fetch(`http://127.0.0.1:${metrics.port}/metrics`);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toMatch(/platform_http_requests_total\{route="deals",outcome="200",component="test"\} 2/);
      expect(text).toMatch(/platform_http_requests_total\{route="other",outcome="404",component="test"\} 1/);
      expect(text).toMatch(
        /platform_http_request_duration_seconds_count\{component="test",route="deals"\} 2/,
      );
      expect(text).not.toContain('/x/y/z');
      expect((await fetch(`http://127.0.0.1:${metrics.port}/`)).status).toBe(404);
      // The public listener has no metrics route.
      expect((await fetch(`http://127.0.0.1:${a.port}/metrics`)).status).toBe(404);
    } finally {
      await metrics.close();
      await drain(app, 100);
    }
  });

  it('METRICS_PORT must be a port other than the public one, named when wrong', () => {
    const env = {
      DATABASE_URL: 'postgresql://x@h/db',
      TOOL_IDENTITY_KEY: 'a'.repeat(64),
      DEALS_MCP_PORT: '3000',
    };
    expect(loadToolConfig('deals', env).metricsPort).toBeUndefined();
    expect(loadToolConfig('deals', { ...env, METRICS_PORT: '9464' }).metricsPort).toBe(9464);
    for (const bad of ['3000', 'abc', '0']) {
      expect(() => loadToolConfig('deals', { ...env, METRICS_PORT: bad })).toThrow(ConfigError);
      expect(() => loadToolConfig('deals', { ...env, METRICS_PORT: bad })).toThrow(/^METRICS_PORT: /);
    }
  });
});
