// The OpenTelemetry SDK behind lib/telemetry/index.ts's interface, imported only when tracing is on.
import {
  type Context,
  context as contextApi,
  DiagLogLevel,
  defaultTextMapGetter,
  defaultTextMapSetter,
  diag,
  isSpanContextValid,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { Logger } from '../logger.ts';
import type { TelemetryConfig } from './config.ts';
import type { ServerSpan, SpanAttributes, Tracing } from './index.ts';

const W3C = new W3CTraceContextPropagator();

function sampler(config: TelemetryConfig): Sampler {
  const ratio = () => new TraceIdRatioBasedSampler(config.samplerRatio);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio();
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

async function exporter(config: TelemetryConfig): Promise<SpanExporter> {
  const options = { url: config.tracesUrl, headers: { ...config.headers }, timeoutMillis: config.timeoutMs };
  if (config.protocol === 'http/json') return new OTLPTraceExporter(options);
  // http/protobuf (the specification's default): the OTLP/HTTP exporter's own transport with the protobuf
  // serializer, as the SDK's protobuf exporter builds it, from the packages the JSON exporter already depends on.
  const [{ OTLPExporterBase }, http, { ProtobufTraceSerializer, TraceExporterMetricsHelper }] =
    await Promise.all([
      import('@opentelemetry/otlp-exporter-base'),
      import('@opentelemetry/otlp-exporter-base/node-http'),
      import('@opentelemetry/otlp-transformer'),
    ]);
  const delegate = http.createOtlpHttpExportDelegate(
    http.convertLegacyHttpOptions(options, 'TRACES', 'v1/traces', {
      'Content-Type': 'application/x-protobuf',
    }),
    ProtobufTraceSerializer,
    'otlp_http_span_exporter',
    TraceExporterMetricsHelper,
    undefined,
  );
  return new OTLPExporterBase(delegate) as unknown as SpanExporter;
}

export async function createOtelTracing(config: TelemetryConfig, log: Logger): Promise<Tracing> {
  // The SDK's own complaints (an export refused, a collector away) reach our log as warnings, once each.
  diag.setLogger(
    {
      error: (message) => log.warn({ component: 'otel' }, `tracing: ${message}`),
      warn: (message) => log.warn({ component: 'otel' }, `tracing: ${message}`),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    DiagLogLevel.WARN,
  );
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({ ...config.resourceAttributes, [ATTR_SERVICE_NAME]: config.serviceName }),
    ),
    sampler: sampler(config),
    spanProcessors: [
      new BatchSpanProcessor(await exporter(config), {
        scheduledDelayMillis: config.scheduleDelayMs,
        maxQueueSize: config.maxQueueSize,
        maxExportBatchSize: Math.min(512, config.maxQueueSize),
      }),
    ],
  });
  const tracer = provider.getTracer('platform-identity');

  function parentContext(parent: { traceparent?: string; tracestate?: string } | undefined): Context {
    if (parent?.traceparent === undefined) return ROOT_CONTEXT;
    return W3C.extract(ROOT_CONTEXT, parent, defaultTextMapGetter);
  }

  return {
    startServerSpan(name, o = {}): ServerSpan {
      const ctx = parentContext(o.parent);
      const span = tracer.startSpan(
        name,
        { kind: SpanKind.SERVER, startTime: o.startTime, attributes: clean(o.attributes) },
        ctx,
      );
      return {
        setName: (n) => span.updateName(n),
        set: (attributes) => span.setAttributes(clean(attributes)),
        fail(errorType) {
          span.setAttribute('error.type', errorType);
          span.setStatus({ code: SpanStatusCode.ERROR });
        },
        propagation() {
          // The W3C header written from the span's own context: what W3C.inject writes for it, without the
          // context object inject needs built and read back on every request.
          const sc = span.spanContext();
          if (isSpanContextValid(sc)) {
            const out: { traceparent: string; tracestate?: string } = {
              traceparent: `00-${sc.traceId}-${sc.spanId}-0${Number(sc.traceFlags || 0).toString(16)}`,
            };
            const state = sc.traceState?.serialize();
            if (state) out.tracestate = state;
            return out;
          }
          const carrier: { traceparent?: string; tracestate?: string } = {};
          W3C.inject(trace.setSpan(contextApi.active(), span), carrier, defaultTextMapSetter);
          return carrier as { traceparent: string; tracestate?: string };
        },
        end: () => span.end(),
      };
    },
    async shutdown() {
      await provider
        .shutdown()
        .catch((err: Error) => log.warn({ err: { message: err.message } }, 'tracing: shutdown'));
    },
  };
}

function clean(attributes: SpanAttributes | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  if (attributes === undefined) return out;
  for (const k in attributes) {
    const v = attributes[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}
