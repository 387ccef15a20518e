import type { Logger } from '../logger.ts';
import type { TelemetryConfig } from './config.ts';

// Tracing as the servers see it: a narrow interface of our own, so that a process without an OTLP endpoint
// loads nothing of the OpenTelemetry SDK (not even @opentelemetry/api) and its request path pays one `undefined`
// check. With an endpoint, startTracing() imports the SDK (lib/telemetry/otel.ts) once, at start-up.
//
// Attributes are set only from fixed lists (lib/telemetry/spans.ts names them): never a header, a query, a body
// or a claim as such, so no token, code, secret, cookie or email can reach an exported span.

export type AttributeValue = string | number | boolean;
export type SpanAttributes = Readonly<Record<string, AttributeValue | undefined>>;

/** The W3C trace context of a request (the `traceparent` header, or MCP's `params._meta`). */
export interface TraceParent {
  traceparent?: string | undefined;
  tracestate?: string | undefined;
}

export interface ServerSpanOptions {
  /** Continued when it is a valid W3C traceparent; else the span starts a new trace. */
  parent?: TraceParent | undefined;
  /** When the request arrived (`Date.now()` then); default now. */
  startTime?: number | undefined;
  attributes?: SpanAttributes | undefined;
}

export interface ServerSpan {
  setName(name: string): void;
  set(attributes: SpanAttributes): void;
  /** Marks the span failed: `error.type` (the refusal's stable reason) and status ERROR. */
  fail(errorType: string): void;
  /** This span's context as the next hop receives it (`traceparent`, `tracestate` when any). */
  propagation(): { traceparent: string; tracestate?: string };
  end(): void;
}

export interface Tracing {
  /** A SERVER span for one inbound request. */
  startServerSpan(name: string, o?: ServerSpanOptions): ServerSpan;
  /** Exports what is still queued, then stops (the process's shutdown path). */
  shutdown(): Promise<void>;
}

/**
 * The process's tracing, or undefined when it is off (no OTLP endpoint): then nothing is imported or created.
 * Called once per process (`platform dev` shares one between its servers).
 */
export async function startTracing(
  config: TelemetryConfig | undefined,
  log: Logger,
): Promise<Tracing | undefined> {
  if (config === undefined) return undefined;
  const { createOtelTracing } = await import('./otel.ts');
  const tracing = await createOtelTracing(config, log);
  log.info(
    {
      serviceName: config.serviceName,
      endpoint: shownUrl(config.tracesUrl),
      protocol: config.protocol,
      sampler: config.sampler,
    },
    'tracing on: exporting spans over OTLP/HTTP',
  );
  return tracing;
}

/** The endpoint without credentials or query (either could hold a collector's key). */
function shownUrl(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}
