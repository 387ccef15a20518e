import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { type Dispatcher, Pool } from 'undici';
import type { Logger } from '../../lib/logger.ts';
import type { GatewayConfig, ServiceConfig } from '../config.ts';
import { type GatewayError, PayloadTooLargeError, UpstreamUnavailableError } from '../errors.ts';
import { responseHeaders } from './headers.ts';

/** One tool server: a keep-alive connection pool and the path its base URL carries. */
export interface Upstream {
  service: string;
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
  return { service: service.name, pool, basePath: service.upstreamBasePath };
}

/** Errors that mean "nothing reached the tool server": safe to retry while the request body is untouched. */
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

export interface ForwardRequest {
  req: IncomingMessage;
  res: ServerResponse;
  upstream: Upstream;
  headers: string[];
  requestId: string;
  /** Declared Content-Length, when given (already checked against the limit). */
  contentLength: string | undefined;
  chunked: boolean;
  maxBodyBytes: number;
  retryMs: number;
  log: Logger;
  /** The single place refusals become responses (gateway/respond.ts). */
  fail: (err: GatewayError) => void;
}

/**
 * Streams the request to the upstream and the response back (undici's dispatch API with our own handler: no
 * buffering, no promise or AsyncResource per request, backpressure both ways). An SSE response is relayed
 * chunk by chunk as it arrives; the client disconnecting aborts the upstream request.
 */
export function forward(f: ForwardRequest): void {
  const hasBody = f.chunked || (f.contentLength !== undefined && f.contentLength !== '0');
  let body: Readable | AsyncIterable<Buffer> | null = null;
  const state = { tooLarge: false };
  if (hasBody) body = f.contentLength !== undefined ? f.req : limitedBody(f.req, f.maxBodyBytes, state);
  const handler = new ProxyHandler(f, body, state, Date.now());
  f.res.once('close', () => handler.clientClosed());
  handler.dispatch();
}

/** A chunked body counted as it streams; past the limit the upstream request is aborted and 413 answered. */
async function* limitedBody(
  req: IncomingMessage,
  max: number,
  state: { tooLarge: boolean },
): AsyncIterable<Buffer> {
  let size = 0;
  // destroyOnReturn false: stopping early must not destroy the request (and with it the client's socket)
  // before the 413 is written.
  for await (const chunk of req.iterator({ destroyOnReturn: false })) {
    size += (chunk as Buffer).length;
    if (size > max) {
      state.tooLarge = true;
      throw new PayloadTooLargeError(max);
    }
    yield chunk as Buffer;
  }
}

class ClientClosedError extends Error {
  override readonly name = 'ClientClosedError';
}

class ProxyHandler implements Dispatcher.DispatchHandler {
  readonly #f: ForwardRequest;
  readonly #body: Readable | AsyncIterable<Buffer> | null;
  readonly #state: { tooLarge: boolean };
  readonly #startedAt: number;
  #controller: Dispatcher.DispatchController | null = null;
  #responseStarted = false;
  #finished = false;
  #clientGone = false;
  #retryTimer: NodeJS.Timeout | undefined;

  constructor(
    f: ForwardRequest,
    body: Readable | AsyncIterable<Buffer> | null,
    state: { tooLarge: boolean },
    startedAt: number,
  ) {
    this.#f = f;
    this.#body = body;
    this.#state = state;
    this.#startedAt = startedAt;
  }

  dispatch(): void {
    const f = this.#f;
    f.upstream.pool.dispatch(
      {
        path: f.upstream.basePath + f.req.url,
        method: f.req.method as Dispatcher.HttpMethod,
        headers: f.headers,
        body: this.#body as Dispatcher.DispatchOptions['body'],
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
    const res = this.#f.res;
    try {
      res.writeHead(statusCode, responseHeaders(headers, this.#f.requestId));
    } catch (err) {
      // A header Node refuses to send (invalid characters): the response cannot be relayed faithfully.
      this.#responseStarted = false;
      this.#finished = true;
      controller.abort(err as Error);
      this.#f.fail(
        new UpstreamUnavailableError(
          'upstream_invalid_response',
          `the ${this.#f.upstream.service} tool server sent an invalid response`,
        ),
      );
      return;
    }
    // A streamed response (SSE: no Content-Length) must not wait for its first event to show its headers.
    if (headers['content-length'] === undefined) res.flushHeaders();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const res = this.#f.res;
    if (!res.write(chunk)) {
      controller.pause();
      res.once('drain', () => controller.resume());
    }
  }

  onResponseEnd(): void {
    this.#finished = true;
    this.#f.res.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    const f = this.#f;
    if (this.#finished) return;
    if (this.#clientGone) {
      this.#finished = true;
      f.log.debug(
        { reqId: f.requestId, service: f.upstream.service },
        'client closed; upstream request aborted',
      );
      return;
    }
    if (this.#responseStarted || f.res.headersSent) {
      // Mid-response there is no status left to change: cut the connection so the client sees a broken
      // response, never a silently truncated one.
      this.#finished = true;
      f.log.warn(
        { reqId: f.requestId, service: f.upstream.service, err: { message: err.message } },
        'upstream failed mid-response',
      );
      f.res.destroy();
      return;
    }
    if (this.#state.tooLarge) {
      this.#finished = true;
      f.fail(new PayloadTooLargeError(f.maxBodyBytes));
      return;
    }
    const code = (err as { code?: string }).code ?? '';
    if (
      CONNECT_ERRORS.has(code) &&
      this.#bodyUntouched() &&
      Date.now() + RETRY_INTERVAL_MS - this.#startedAt < f.retryMs
    ) {
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
    f.fail(
      new UpstreamUnavailableError(
        reason,
        `the ${f.upstream.service} tool server is unavailable (${code || err.message})`,
      ),
    );
  }

  #bodyUntouched(): boolean {
    const b = this.#body;
    if (b === null) return true;
    const r = b as IncomingMessage;
    return r === this.#f.req && !r.readableDidRead && !r.destroyed;
  }
}
