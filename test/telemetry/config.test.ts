import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../lib/config.ts';
import { telemetryConfig } from '../../lib/telemetry/config.ts';

const failure = (env: Record<string, string>): string => {
  try {
    telemetryConfig(env, 'platform-gateway');
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('accepted');
};

describe('telemetryConfig (the OTEL_* variables)', () => {
  it('is off without an OTLP endpoint, or with OTEL_SDK_DISABLED=true', () => {
    expect(telemetryConfig({}, 'platform-idp')).toBeUndefined();
    expect(
      telemetryConfig({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }, 'platform-idp'),
    ).toBe(undefined);
    expect(
      telemetryConfig(
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' },
        'platform-idp',
      ),
    ).toBeUndefined();
  });

  it('takes the base endpoint plus /v1/traces, or the traces endpoint as given; defaults as the specification', () => {
    const c = telemetryConfig(
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' },
      'platform-tool-mail',
    )!;
    expect(c).toMatchObject({
      serviceName: 'platform-tool-mail',
      tracesUrl: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    });
    expect(
      telemetryConfig(
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored:4318',
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://otlp.example/api/traces',
        },
        'platform-idp',
      )!.tracesUrl,
    ).toBe('https://otlp.example/api/traces');
  });

  it('reads the service name, resource attributes, headers, protocol and sampler', () => {
    const c = telemetryConfig(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,service.name=ignored,team=id%20platform',
        OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=abc%3D',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      },
      'platform-gateway',
    )!;
    expect(c).toMatchObject({
      serviceName: 'ignored',
      protocol: 'http/json',
      resourceAttributes: { 'deployment.environment.name': 'prod', team: 'id platform' },
      headers: { 'x-api-key': 'abc=' },
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.25,
    });
    expect(
      telemetryConfig(
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SERVICE_NAME: 'edge-gateway' },
        'platform-gateway',
      )!.serviceName,
    ).toBe('edge-gateway');
  });

  it('refuses bad values naming the variable', () => {
    const base = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(failure({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toMatch(
      /^OTEL_EXPORTER_OTLP_ENDPOINT: /,
    );
    expect(failure({ ...base, OTEL_TRACES_SAMPLER: 'sometimes' })).toMatch(
      /^OTEL_TRACES_SAMPLER: must be one of/,
    );
    expect(failure({ ...base, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' })).toMatch(
      /^OTEL_TRACES_SAMPLER_ARG: /,
    );
    expect(failure({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toBe(
      'OTEL_EXPORTER_OTLP_PROTOCOL: grpc is not supported; use http/protobuf or http/json',
    );
    expect(failure({ ...base, OTEL_RESOURCE_ATTRIBUTES: 'novalue' })).toMatch(/^OTEL_RESOURCE_ATTRIBUTES: /);
    expect(failure({ ...base, OTEL_BSP_SCHEDULE_DELAY: 'soon' })).toMatch(/^OTEL_BSP_SCHEDULE_DELAY: /);
  });
});
