import { ConfigError, type Env, oneOf, optionalString } from '../config.ts';

// The standard OpenTelemetry SDK variables (opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/),
// read once by each process's config.ts. Tracing is on only when an OTLP endpoint is named; without one nothing of
// the SDK is even loaded (lib/telemetry/index.ts).

export type OtlpProtocol = 'http/protobuf' | 'http/json';

export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type SamplerName = (typeof SAMPLERS)[number];

export interface TelemetryConfig {
  /** OTEL_SERVICE_NAME, else `service.name` of OTEL_RESOURCE_ATTRIBUTES, else `platform-<component>`. */
  serviceName: string;
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  tracesUrl: string;
  protocol: OtlpProtocol;
  /** OTEL_EXPORTER_OTLP_(TRACES_)HEADERS: sent with every export (a collector's API key). */
  headers: Readonly<Record<string, string>>;
  sampler: SamplerName;
  /** OTEL_TRACES_SAMPLER_ARG: the ratio of the *traceidratio samplers (default 1). */
  samplerRatio: number;
  /** OTEL_RESOURCE_ATTRIBUTES (service.name excluded: it is `serviceName`). */
  resourceAttributes: Readonly<Record<string, string>>;
  /** OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT, ms (default 10 000). */
  timeoutMs: number;
  /** OTEL_BSP_SCHEDULE_DELAY, ms between two exports (default 5000). */
  scheduleDelayMs: number;
  /** OTEL_BSP_MAX_QUEUE_SIZE: spans held for export at most; beyond it new spans are dropped (default 2048). */
  maxQueueSize: number;
}

/** `key=value,key=value` (values percent-decoded), as OTEL_RESOURCE_ATTRIBUTES and the header lists are written. */
function keyValues(env: Env, name: string): Record<string, string> {
  const raw = optionalString(env, name);
  const out: Record<string, string> = {};
  if (raw === undefined) return out;
  for (const part of raw.split(',')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    if (eq <= 0) throw new ConfigError(name, `"${part.trim()}" is not key=value`);
    let value: string;
    try {
      value = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      throw new ConfigError(
        name,
        `the value of "${part.slice(0, eq).trim()}" is not percent-encoded correctly`,
      );
    }
    out[part.slice(0, eq).trim()] = value;
  }
  return out;
}

function url(env: Env, name: string): URL | undefined {
  const v = optionalString(env, name);
  if (v === undefined) return undefined;
  try {
    const u = new URL(v);
    if (u.protocol === 'http:' || u.protocol === 'https:') return u;
  } catch {
    // reported below
  }
  throw new ConfigError(name, `must be an http(s) URL, got "${v}"`);
}

/** A whole number from 1 to 600 000 (milliseconds, or a queue size). */
function milliseconds(env: Env, name: string): number | undefined {
  const v = optionalString(env, name);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 600_000)
    throw new ConfigError(name, `must be a whole number from 1 to 600000, got "${v}"`);
  return Number(v);
}

/**
 * The process's tracing settings; undefined (tracing off) when no OTLP endpoint is set or OTEL_SDK_DISABLED=true.
 * `component` names the default service: `platform-idp`, `platform-gateway`, `platform-tool-<name>`, `platform-dev`.
 */
export function telemetryConfig(env: Env, defaultServiceName: string): TelemetryConfig | undefined {
  if (optionalString(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined;
  const traces = url(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = url(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (traces === undefined && base === undefined) return undefined;
  const protocolVar =
    optionalString(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') !== undefined
      ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  if (optionalString(env, protocolVar) === 'grpc')
    throw new ConfigError(protocolVar, 'grpc is not supported; use http/protobuf or http/json');
  const protocol = oneOf(env, protocolVar, ['http/protobuf', 'http/json'] as const, 'http/protobuf');
  const sampler = oneOf(env, 'OTEL_TRACES_SAMPLER', SAMPLERS, 'parentbased_always_on');
  let samplerRatio = 1;
  const arg = optionalString(env, 'OTEL_TRACES_SAMPLER_ARG');
  if (arg !== undefined && sampler.endsWith('traceidratio')) {
    samplerRatio = Number(arg);
    if (!/^\d*\.?\d+$/.test(arg) || samplerRatio < 0 || samplerRatio > 1)
      throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', `must be a ratio from 0 to 1, got "${arg}"`);
  }
  const resourceAttributes = keyValues(env, 'OTEL_RESOURCE_ATTRIBUTES');
  const serviceName =
    optionalString(env, 'OTEL_SERVICE_NAME') ?? resourceAttributes['service.name'] ?? defaultServiceName;
  delete resourceAttributes['service.name'];
  const tracesUrl = traces?.href ?? `${base!.href.replace(/\/$/, '')}/v1/traces`; // the spec's signal path under the base
  return Object.freeze({
    serviceName,
    tracesUrl,
    protocol,
    headers: Object.freeze({
      ...keyValues(env, 'OTEL_EXPORTER_OTLP_HEADERS'),
      ...keyValues(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
    }),
    sampler,
    samplerRatio,
    resourceAttributes: Object.freeze(resourceAttributes),
    timeoutMs:
      milliseconds(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') ??
      milliseconds(env, 'OTEL_EXPORTER_OTLP_TIMEOUT') ??
      10_000,
    scheduleDelayMs: milliseconds(env, 'OTEL_BSP_SCHEDULE_DELAY') ?? 5000,
    maxQueueSize: milliseconds(env, 'OTEL_BSP_MAX_QUEUE_SIZE') ?? 2048,
  });
}
