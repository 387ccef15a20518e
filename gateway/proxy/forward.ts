import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Dispatcher, Pool } from 'undici';
import type { Logger } from '../../lib/logger.ts';
import type { GatewayConfig, ServiceConfig } from '../config.ts';
import { type GatewayError, UpstreamAuthFailedError, UpstreamUnavailableError } from '../errors.ts';
import { isLearnOnly, narrowJsonBody, SseToolsNarrower, type ToolFilter } from '../policy/tools-list.ts';
import { responseHeaders } from './headers.ts';

/**
 * One tool server: a keep-alive connection pool per replica (`<SERVICE>_MCP_UPSTREAM` lists them) and the path
 * their base URLs carry. Tool servers are stateless, so any replica may answer any request: requests take the
 * replicas in turn.
 */
export interface Upstream {
  service: ServiceConfig;
  pools: readonly Pool[];
  basePath: string;
  /** Round-robin position: the replica the next request starts with. */
  next: number;
  close(): Promise<void>;
}

export function createUpstream(config: GatewayConfig, service: ServiceConfig): Upstream {
  const pools = service.upstreamOrigins.map(
    (origin) =>
      new Pool(origin, {
        // No body timeout: an MCP SSE stream may stay quiet for minutes (undici's default 300 s would cut it).
        // The client going away is what ends an idle stream (see ProxyHandler).
        bodyTimeout: 0,
        headersTimeout: config.upstreamHeadersTimeoutMs,
        connect: { timeout: 5000 },
        // Tool servers speak HTTP/1.1; no ALPN surprises on an https upstream.
        allowH2: false,
      }),
  );
  return {
    service,
    pools,
    basePath: service.upstreamBasePath,
    next: 0,
    close: async () => {
      await Promise.all(pools.map((p) => p.destroy()));
    },
  };
}

/** Errors of the connection attempt itself: nothing of the request reached the tool server. */
const CONNECT_ERRORS = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/**
 * Errors of a kept-alive connection that the replica closed or reset (it stopped or restarted). They mean
 * "nothing reached it" only when they come before undici started writing this request on the connection
 * (before onRequestStart); after that the tool server may have started the request, which is never retried.
 */
const CLOSED_ERRORS = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
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
  /**
   * A tools/list under a policy: the answer is narrowed to the tools this filter keeps (a JSON answer is held
   * whole and rewritten; an SSE answer is rewritten event by event). Undefined: relayed untouched.
   */
  narrow?: ToolFilter | undefined;
  /**
   * The request carries the user's upstream token (a service with an upstream connection): a 401 answer means
   * the upstream refused that token. This is told (the token is forgotten), and the client gets 502
   * UPSTREAM_AUTH_FAILED instead of the answer; the request is not retried (the upstream may have acted on it).
   */
  onUnauthorized?: (() => void) | undefined;
}

function isEventStream(type: string | string[] | undefined): boolean {
  return (
    typeof type === 'string' && type.length >= 17 && type.slice(0, 17).toLowerCase() === 'text/event-stream'
  );
}

/** How a narrowed tools/list answer is being relayed. */
type Narrowing =
  | { kind: 'json'; status: number; headers: string[]; chunks: Buffer[] }
  | { kind: 'sse'; narrower: SseToolsNarrower };

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
  readonly #narrow: ToolFilter | undefined;
  readonly #onUnauthorized: (() => void) | undefined;
  #narrowing: Narrowing | undefined;
  readonly #startedAt = Date.now();
  #controller: Dispatcher.DispatchController | null = null;
  /** Replica of the current attempt (index into upstream.pools) and how many attempts were made. */
  #target: number;
  #attempts = 0;
  /** Whether undici began writing the current attempt on a connection (see CLOSED_ERRORS). */
  #writing = false;
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
    this.#narrow = out.narrow;
    this.#onUnauthorized = out.onUnauthorized;
    const u = out.upstream;
    this.#target = u.next;
    u.next = u.pools.length === 1 ? 0 : (u.next + 1) % u.pools.length;
  }

  dispatch(): void {
    this.#attempts++;
    this.#writing = false;
    this.#upstream.pools[this.#target]!.dispatch(
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
    this.#writing = true;
    if (this.#clientGone) controller.abort(new ClientClosedError('client closed the connection'));
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    // 1xx interim responses are not relayed (Node answered the client's Expect: 100-continue itself).
    if (statusCode < 200) return;
    if (statusCode === 401 && this.#onUnauthorized !== undefined) {
      this.#finished = true;
      controller.abort(new Error('upstream refused the upstream token'));
      this.#onUnauthorized();
      const service = this.#upstream.service;
      this.#fail(
        new UpstreamAuthFailedError(
          'upstream_unauthorized',
          `the ${service.name} upstream refused your ${service.upstreamConnection} credentials (401); the request was not retried, the next one uses fresh credentials`,
        ),
      );
      return;
    }
    this.#responseStarted = true;
    const res = this.#res;
    if (this.#narrow !== undefined && !this.#startNarrowing(controller, statusCode, headers)) return;
    if (this.#narrowing?.kind === 'json') return;
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
    // An event stream must not wait for its first event to show its headers. Anything else is not flushed early:
    // Node then sends the headers with the first chunk (and a chunked answer that arrived whole, as the MCP SDK's
    // JSON answers do, goes out in one write with its last chunk) instead of one write for each.
    if (isEventStream(headers['content-type'])) res.flushHeaders();
  }

  /**
   * Decides how a tools/list answer is narrowed. False: refused (an encoded body cannot be read, and relaying
   * it unread would list tools the policy hides).
   */
  #startNarrowing(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): boolean {
    const encoding = headers['content-encoding'];
    const type = String(headers['content-type'] ?? '').toLowerCase();
    if (encoding !== undefined && encoding !== 'identity') {
      // Only the metrics were reading it: relayed unread.
      if (isLearnOnly(this.#narrow!)) return true;
      this.#responseStarted = false;
      this.#finished = true;
      controller.abort(new Error('encoded tools/list answer'));
      this.#fail(
        new UpstreamUnavailableError(
          'upstream_encoded_tools_list',
          `the ${this.#upstream.service.name} tool server compressed a tools/list answer the policy must narrow`,
        ),
      );
      return false;
    }
    if (type.startsWith('text/event-stream')) {
      this.#narrowing = { kind: 'sse', narrower: new SseToolsNarrower(this.#narrow!) };
    } else if (type.startsWith('application/json')) {
      const out = responseHeaders(headers, this.#requestId);
      // The length changes with the rewrite; it is set again when the body is whole.
      for (let i = out.length - 2; i >= 0; i -= 2) {
        if (out[i] === 'content-length' || out[i] === 'transfer-encoding') out.splice(i, 2);
      }
      this.#narrowing = { kind: 'json', status: statusCode, headers: out, chunks: [] };
    }
    return true;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const n = this.#narrowing;
    if (n?.kind === 'json') {
      n.chunks.push(chunk);
      return;
    }
    if (n?.kind === 'sse') {
      const text = n.narrower.push(chunk);
      if (text === '') return;
      chunk = Buffer.from(text);
    }
    const res = this.#res;
    if (!res.write(chunk)) {
      controller.pause();
      res.once('drain', () => controller.resume());
    }
  }

  onResponseEnd(): void {
    this.#finished = true;
    const n = this.#narrowing;
    if (n?.kind === 'json') {
      const original = Buffer.concat(n.chunks).toString('utf8');
      const body = Buffer.from(narrowJsonBody(original, this.#narrow!) ?? original);
      n.headers.push('content-length', String(body.length));
      this.#res.writeHead(n.status, n.headers);
      this.#res.end(body);
      return;
    }
    if (n?.kind === 'sse') {
      this.#res.end(n.narrower.end());
      return;
    }
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
    const notSent = CONNECT_ERRORS.has(code) || (CLOSED_ERRORS.has(code) && !this.#writing);
    if (notSent) {
      // Nothing reached this replica: the next one is tried at once; after a round of every replica, the
      // spec's proxy rule (retry for up to 5 s at 250 ms intervals) paces the next round.
      const pools = this.#upstream.pools;
      this.#target = (this.#target + 1) % pools.length;
      this.#controller = null;
      if (this.#attempts % pools.length !== 0) {
        log.debug({ reqId: this.#requestId, service, code }, 'upstream replica unreachable; next replica');
        this.dispatch();
        return;
      }
      if (Date.now() + RETRY_INTERVAL_MS - this.#startedAt < this.ctx.retryMs) {
        this.#retryTimer = setTimeout(() => this.dispatch(), RETRY_INTERVAL_MS);
        return;
      }
    }
    this.#finished = true;
    const reason =
      code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT'
        ? 'upstream_timeout'
        : notSent
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
