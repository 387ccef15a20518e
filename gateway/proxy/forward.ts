import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Dispatcher, Pool } from 'undici';
import type { Logger } from '../../lib/logger.ts';
import type { GatewayConfig, ServiceConfig } from '../config.ts';
import { type GatewayError, UpstreamUnavailableError } from '../errors.ts';
import { responseHeaders } from './headers.ts';

/** One tool server: a keep-alive connection pool and the path its base URL carries. */
export interface Upstream {
  service: ServiceConfig;
  pool: Pool;
  basePath: string;
}

export function createUpstream(config: GatewayConfig, service: ServiceConfig): Upstream {
  const pool = new Pool(service.upstreamOrigin, {
    // No body timeout: an MCP SSE stream may stay quiet for minutes (undici's default 300 s would cut it).
    // The client going away is what ends an idle stream (see ProxyHandler).
    bodyTimeout: 0,
    headersTimeout: config.upstreamHeadersTimeoutMs,
    connect: { timeout: 5000 },
    // Tool servers speak HTTP/1.1; no ALPN surprises on an https upstream.
    allowH2: false,
  });
  return { service, pool, basePath: service.upstreamBasePath };
}

/** Errors that mean "nothing reached the tool server": safe to retry (the body is held whole in memory). */
const CONNECT_ERRORS = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);
// resource-server-contract.md § Startup behaviour 4: a 5 s retry window at 250 ms intervals.
const RETRY_INTERVAL_MS = 250;

/** What every forwarded request of one gateway shares (built once, not per request). */
export interface ForwardContext {
  retryMs: number;
  log: Logger;
  /** The single place refusals become responses (gateway/respond.ts). */
  fail: (
    req: IncomingMessage,
    res: ServerResponse,
    requestId: string,
    service: ServiceConfig,
    err: GatewayError,
  ) => void;
}

/** One request on its way to a tool server. */
export interface Outbound {
  upstream: Upstream;
  /** The request target at the upstream: its base path + the client's path and query (what the identity signs). */
  path: string;
  /** Flat `[name, value, …]` list, identity headers included. */
  headers: string[];
  requestId: string;
  /** The body, already read whole (proxy/body.ts); null for none. */
  body: Buffer | null;
}

const kHandler = Symbol('gateway.proxyHandler');
type TrackedResponse = ServerResponse & { [kHandler]?: ProxyHandler };

// One shared listener instead of a closure per request: the response points at its handler.
function onResponseClose(this: TrackedResponse): void {
  this[kHandler]?.clientClosed();
}

/**
 * Sends the request (its body already read whole) to the upstream and streams the response back (undici's
 * dispatch API with our own handler: no promise or AsyncResource per request, backpressure on the response).
 * An SSE response is relayed chunk by chunk as it arrives; the client disconnecting aborts the upstream request.
 * With the body in hand, undici writes request line, headers and body in one write, and a refused connection can
 * always be retried.
 */
export function forward(ctx: ForwardContext, req: IncomingMessage, res: ServerResponse, out: Outbound): void {
  // The client may have gone while the bearer was being verified (a key-set fetch): nothing to forward then.
  if (res.destroyed || req.socket?.destroyed !== false) return;
  const handler = new ProxyHandler(ctx, req, res, out);
  (res as TrackedResponse)[kHandler] = handler;
  res.on('close', onResponseClose);
  handler.dispatch();
}

class ClientClosedError extends Error {
  override readonly name = 'ClientClosedError';
}

class ProxyHandler implements Dispatcher.DispatchHandler {
  readonly ctx: ForwardContext;
  readonly req: IncomingMessage;
  readonly #res: ServerResponse;
  readonly #upstream: Upstream;
  readonly #path: string;
  readonly #headers: string[];
  readonly #requestId: string;
  readonly #body: Buffer | null;
  readonly #startedAt = Date.now();
  #controller: Dispatcher.DispatchController | null = null;
  #responseStarted = false;
  #finished = false;
  #clientGone = false;
  #retryTimer: NodeJS.Timeout | undefined;

  constructor(ctx: ForwardContext, req: IncomingMessage, res: ServerResponse, out: Outbound) {
    this.ctx = ctx;
    this.req = req;
    this.#res = res;
    this.#upstream = out.upstream;
    this.#path = out.path;
    this.#headers = out.headers;
    this.#requestId = out.requestId;
    this.#body = out.body;
  }

  dispatch(): void {
    this.#upstream.pool.dispatch(
      {
        path: this.#path,
        method: this.req.method as Dispatcher.HttpMethod,
        headers: this.#headers,
        body: this.#body,
      },
      this,
    );
  }

  clientClosed(): void {
    if (this.#finished) return;
    this.#clientGone = true;
    clearTimeout(this.#retryTimer);
    this.#controller?.abort(new ClientClosedError('client closed the connection'));
  }

  #fail(err: GatewayError): void {
    this.ctx.fail(this.req, this.#res, this.#requestId, this.#upstream.service, err);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#clientGone) controller.abort(new ClientClosedError('client closed the connection'));
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    // 1xx interim responses are not relayed (Node answered the client's Expect: 100-continue itself).
    if (statusCode < 200) return;
    this.#responseStarted = true;
    const res = this.#res;
    try {
      res.writeHead(statusCode, responseHeaders(headers, this.#requestId));
    } catch (err) {
      // A header Node refuses to send (invalid characters): the response cannot be relayed faithfully.
      this.#responseStarted = false;
      this.#finished = true;
      controller.abort(err as Error);
      this.#fail(
        new UpstreamUnavailableError(
          'upstream_invalid_response',
          `the ${this.#upstream.service.name} tool server sent an invalid response`,
        ),
      );
      return;
    }
    // A streamed response (SSE: no Content-Length) must not wait for its first event to show its headers.
    if (headers['content-length'] === undefined) res.flushHeaders();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const res = this.#res;
    if (!res.write(chunk)) {
      controller.pause();
      res.once('drain', () => controller.resume());
    }
  }

  onResponseEnd(): void {
    this.#finished = true;
    this.#res.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.#finished) return;
    const { log } = this.ctx;
    const service = this.#upstream.service.name;
    if (this.#clientGone) {
      this.#finished = true;
      log.debug({ reqId: this.#requestId, service }, 'client closed; upstream request aborted');
      return;
    }
    if (this.#responseStarted || this.#res.headersSent) {
      // Mid-response there is no status left to change: cut the connection so the client sees a broken
      // response, never a silently truncated one.
      this.#finished = true;
      log.warn(
        { reqId: this.#requestId, service, err: { message: err.message } },
        'upstream failed mid-response',
      );
      this.#res.destroy();
      return;
    }
    const code = (err as { code?: string }).code ?? '';
    if (CONNECT_ERRORS.has(code) && Date.now() + RETRY_INTERVAL_MS - this.#startedAt < this.ctx.retryMs) {
      this.#controller = null;
      this.#retryTimer = setTimeout(() => this.dispatch(), RETRY_INTERVAL_MS);
      return;
    }
    this.#finished = true;
    const reason =
      code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT'
        ? 'upstream_timeout'
        : CONNECT_ERRORS.has(code)
          ? 'upstream_unreachable'
          : 'upstream_failed';
    this.#fail(
      new UpstreamUnavailableError(
        reason,
        `the ${service} tool server is unavailable (${code || err.message})`,
      ),
    );
  }
}
