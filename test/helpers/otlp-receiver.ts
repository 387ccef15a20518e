// An OTLP/HTTP receiver of the test's own (node:http): what a collector would be to the servers' exporters. It
// takes `POST /v1/traces` in the JSON encoding (OTEL_EXPORTER_OTLP_PROTOCOL=http/json) and keeps every span,
// flattened; a protobuf export is counted but not decoded (no decoder is installed).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean>;
  resource: Record<string, string | number | boolean>;
  status: { code?: number };
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Every export request's raw body, as text (the secrets search reads these whole). */
  bodies: string[];
  /** Content types of the export requests. */
  contentTypes: string[];
  /** Resolves once spans matching `pred` number at least `n`. */
  waitFor(pred: (s: ReceivedSpan) => boolean, n?: number, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};

function value(v: AnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return JSON.stringify(v);
}

function attributes(
  list: Array<{ key: string; value: AnyValue }> | undefined,
): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const a of list ?? []) out[a.key] = value(a.value);
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const contentTypes: string[] = [];
  const waiters = new Set<() => void>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let raw = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') raw = gunzipSync(raw);
      contentTypes.push(String(req.headers['content-type']));
      if (req.url !== '/v1/traces' || req.method !== 'POST') {
        res.writeHead(404).end();
        return;
      }
      const text = raw.toString('utf8');
      bodies.push(text);
      if (String(req.headers['content-type']).startsWith('application/json')) {
        const doc = JSON.parse(text) as {
          resourceSpans?: Array<{
            resource?: { attributes?: Array<{ key: string; value: AnyValue }> };
            scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }>;
          }>;
        };
        for (const rs of doc.resourceSpans ?? []) {
          const resource = attributes(rs.resource?.attributes);
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              spans.push({
                service: String(resource['service.name']),
                traceId: String(s.traceId),
                spanId: String(s.spanId),
                parentSpanId: String(s.parentSpanId ?? ''),
                name: String(s.name),
                kind: Number(s.kind),
                attributes: attributes(s.attributes as Array<{ key: string; value: AnyValue }>),
                resource,
                status: (s.status as { code?: number }) ?? {},
              });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      for (const w of waiters) w();
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    contentTypes,
    waitFor(pred, n = 1, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = spans.filter(pred);
          if (found.length >= n) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(found);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `timed out waiting for spans; have: ${spans.map((s) => `${s.service}:${s.name}`).join(', ')}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
