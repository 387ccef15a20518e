// deploy/compose.telemetry.yaml: every server of compose.yaml exports its spans to the overlay's collector (the
// environment it adds, fed to the servers' own OTEL_* reader), the collector listens where they send, on the
// network they share, and forwards to Jaeger.
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { telemetryConfig } from '../../lib/telemetry/config.ts';
import { deployFile, interpolate } from './support.ts';

interface Service {
  environment?: Record<string, string>;
  networks?: Record<string, { aliases?: string[] }> | string[];
  volumes?: string[];
  command?: string[];
}
const compose = parse(deployFile('compose.yaml')) as { services: Record<string, Service> };
const overlay = parse(deployFile('compose.telemetry.yaml'), { merge: true }) as {
  services: Record<string, Service>;
};
const SERVERS = ['idp', 'gateway', 'tool-platform', 'tool-mail', 'tool-deals'];

describe('deploy/compose.telemetry.yaml', () => {
  it('points every server of compose.yaml at the collector', () => {
    const servers = Object.keys(compose.services).filter((s) => SERVERS.includes(s));
    expect(servers.sort()).toEqual([...SERVERS].sort());
    for (const name of SERVERS) {
      const env = Object.fromEntries(
        Object.entries(overlay.services[name]!.environment ?? {}).map(([k, v]) => [k, interpolate(v, {})]),
      );
      const c = telemetryConfig(env, `platform-${name}`);
      expect(c, name).toMatchObject({
        tracesUrl: 'http://otel-collector:4318/v1/traces',
        serviceName: `platform-${name}`,
        sampler: 'parentbased_always_on',
      });
    }
  });

  it("runs the collector on the servers' network, receiving OTLP/HTTP on 4318 and sending to Jaeger", () => {
    const collector = overlay.services['otel-collector']!;
    expect(collector.networks).toEqual({ backend: { aliases: ['otel-collector'] } });
    expect(collector.volumes).toContain('./otel-collector/config.yaml:/etc/otelcol/config.yaml:ro');
    const config = parse(deployFile('otel-collector/config.yaml')) as {
      receivers: { otlp: { protocols: { http: { endpoint: string } } } };
      exporters: Record<string, { endpoint?: string }>;
      service: { pipelines: { traces: { receivers: string[]; exporters: string[] } } };
    };
    expect(config.receivers.otlp.protocols.http.endpoint).toBe('0.0.0.0:4318');
    expect(config.service.pipelines.traces.receivers).toEqual(['otlp']);
    expect(config.service.pipelines.traces.exporters).toContain('otlphttp/jaeger');
    expect(config.exporters['otlphttp/jaeger']!.endpoint).toBe('http://jaeger:4318');
    expect(overlay.services.jaeger!.networks).toEqual({ backend: { aliases: ['jaeger'] } });
  });
});
