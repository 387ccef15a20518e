import { createServer, type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { drain, listen } from './lifecycle.ts';
import type { Logger } from './logger.ts';

// One Prometheus registry per process, served on its own port (METRICS_PORT), never on the public one: the
// public listener has no /metrics route, so nothing a client reaches through the proxy can read it.

export interface ProcessMetrics {
  registry: Registry;
  /** `platform_http_requests_total{route,outcome}` and its latency histogram, shared by every server. */
  http: HttpMetrics;
}

export interface HttpMetrics {
  requests: Counter<'route' | 'outcome'>;
  duration: Histogram<'route'>;
}

/**
 * A registry with the process's default metrics (CPU, memory, event-loop lag) and the request metrics every
 * server records. `component` (`idp`, `gateway`, `tool-deals`, …) is a label on every series, so one query
 * over all processes can tell them apart whatever the scrape target's name.
 */
export function createProcessMetrics(component: string): ProcessMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ component });
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'platform_http_requests_total',
    help: 'HTTP requests answered, by route and outcome (the status code)',
    labelNames: ['route', 'outcome'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'platform_http_request_duration_seconds',
    help: 'Time from the request to the end of its answer, by route',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  return { registry, http: { requests, duration } };
}

/**
 * Wraps a request listener so every answer counts once: one counter increment and one histogram observation
 * when the response finishes (or the client goes away: outcome `aborted`). `routeOf` must map to a small fixed
 * set of names (route table entries, service names), never to raw paths, which would grow without bound.
 */
export function instrument(
  handler: RequestListener,
  http: HttpMetrics,
  routeOf: (req: IncomingMessage) => string,
): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now();
    const route = routeOf(req);
    res.once('close', () => {
      const outcome = res.writableFinished ? String(res.statusCode) : 'aborted';
      http.requests.inc({ route, outcome });
      http.duration.observe({ route }, (performance.now() - started) / 1000);
    });
    return handler(req, res);
  };
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/** Serves `GET /metrics` (Prometheus text format) on `port`; anything else is 404. */
export async function serveMetrics(
  registry: Registry,
  port: number,
  log: Logger,
  host?: string,
): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: Error) => {
        log.error({ err }, 'metrics collection failed');
        res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics collection failed\n');
      },
    );
  });
  const addr = await listen(server, port, host);
  log.info({ port: addr.port }, 'metrics listening');
  return {
    port: addr.port,
    close: () => drain(server, 1000),
  };
}
