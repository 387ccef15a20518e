import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { answerPreflight } from '../lib/cors.ts';
import { type ReadinessChecks, sendLive, sendReady } from '../lib/health.ts';
import { bodySha256, pushIdentityHeaders, type SignedRequest } from '../lib/identity.ts';
import type { Logger } from '../lib/logger.ts';
import type { Tracing } from '../lib/telemetry/index.ts';
import { mcpRequestInfo, RequestTrace, traceMcp, traceOf } from '../lib/telemetry/request.ts';
import { checkAudience, checkScope } from './auth/access.ts';
import { type PresentedToken, presentedToken } from './auth/bearer.ts';
import type { VerifiedToken } from './auth/verified-token.ts';
import type { VerifyToken } from './auth/verify-token.ts';
import type { GatewayConfig, ServiceConfig } from './config.ts';
import type { DpopCheck } from './dpop/check.ts';
import {
  BadRequestError,
  ConnectionRequiredError,
  GatewayError,
  InvalidTokenError,
  MethodNotAllowedError,
  NotFoundError,
  PayloadTooLargeError,
  RevocationUnavailableError,
} from './errors.ts';
import { checkOrigin, createHostGuard } from './guards.ts';
import { protectedResourceMetadata } from './metadata.ts';
import type { McpOperations } from './metrics.ts';
import type { PolicyFile } from './policy/gate.ts';
import { type RpcCall, rpcCalls } from './policy/rpc.ts';
import { learningFilter, type ToolFilter } from './policy/tools-list.ts';
import type { BodyReader } from './proxy/body.ts';
import { type ForwardContext, forward, type Upstream } from './proxy/forward.ts';
import { type InboundHeaders, scanRequestHeaders } from './proxy/headers.ts';
import { checkMcpHeaders, decodeHeaderValue } from './proxy/mcp-headers.ts';
import { sendError, sendJsonBody } from './respond.ts';
import type { RevocationCheck } from './revocation/mirror.ts';
import {
  compileRoutes,
  GATEWAY_ROUTES,
  METADATA_PATH,
  type ProtectedHandlerName,
  type PublicHandlerName,
  type RouteSpec,
} from './routes.ts';
import { elicitationAnswer } from './upstream-auth/elicitation.ts';
import {
  checkExchangeable,
  type ObtainCredential,
  type UpstreamCredential,
} from './upstream-auth/upstream-credentials.ts';

export interface GatewayContext {
  config: GatewayConfig;
  verify: VerifyToken;
  /** DPoP (RFC 9449) after the token's own checks: bound tokens need a proof, each used once (dpop/check.ts). */
  dpop: DpopCheck;
  revocation: RevocationCheck;
  upstreams: ReadonlyMap<string, Upstream>;
  /** The per-tool policy; undefined (no GATEWAY_POLICY_FILE): nothing is checked beyond the service's scope. */
  policy?: PolicyFile | undefined;
  /** Reads request bodies whole within the configured limit and time (proxy/body.ts). */
  bodies: BodyReader;
  /**
   * The users' upstream tokens (gateway/upstream-auth/); undefined when no service names an upstream connection.
   */
  upstreamAuth?: { obtain: ObtainCredential; refused(credential: UpstreamCredential): void } | undefined;
  /** What `/health/ready` asks: the revocation mirror in sync with Redis (`redis`), the key sets (`jwks`). */
  readiness?: ReadinessChecks;
  /** OpenTelemetry traces; absent: nothing is traced (and nothing of the SDK is loaded). */
  tracing?: Tracing | undefined;
  /** `mcp_server_operation_duration_seconds` (METRICS_PORT); absent: not recorded. */
  operations?: McpOperations | undefined;
  log: Logger;
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;
type PublicHandler = (req: IncomingMessage, res: ServerResponse, x: Exchange) => void;
type ProtectedHandler = (req: IncomingMessage, res: ServerResponse, x: Exchange, t: VerifiedToken) => void;

/** What a route's handler needs from the request. */
interface Exchange {
  h: InboundHeaders;
  requestId: string;
  route: Route | undefined;
  /** The bearer as presented (the subject token of an upstream connection's exchange); set once verified. */
  bearer: string | undefined;
  // A protected request once its body is read and the policy has decided (set in `proxy`): what its last steps
  // (the upstream credential, the identity, the dispatch) need, carried here instead of in closures.
  /** The request target at the upstream. */
  path: string;
  body: Buffer | null;
  narrow: ToolFilter | undefined;
}

/** A service's part of the routing: what its routes need (the route table's per-service context). */
interface Route {
  service: ServiceConfig;
  checkHost: (host: string | undefined) => void;
  upstream: Upstream;
  metadata: string;
}

const HEALTH_BODY = JSON.stringify({ status: 'ok' });
/** Still serving (GATEWAY_REVOCATION_MODE decides how), but the revocation mirror awaits a resync from Redis. */
const RESYNCING_BODY = JSON.stringify({ status: 'degraded', revocations: 'resyncing' });
const READ_METHODS = ['GET', 'HEAD'];
// A dot segment or an encoded slash, dot or backslash could make the tool server resolve the path to another
// service's prefix than the one this request was authorised for.
const UNSAFE_PATH = /(?:^|\/)\.{1,2}(?:\/|$)|%2e|%2f|%5c|\\/i;

/**
 * The gateway as a request handler (server.ts owns the port and the process). Routes are the table in
 * routes.ts (GATEWAY_ROUTES); this file holds their handlers and the one dispatcher that reads the table.
 */
export function createGatewayHandler(ctx: GatewayContext): Handler {
  const { config, verify, dpop, revocation, policy, upstreamAuth, log, tracing, operations } = ctx;
  const services = new Map<string, Route>();
  for (const service of config.services) {
    services.set(service.name, {
      service,
      checkHost: createHostGuard(service),
      upstream: ctx.upstreams.get(service.name)!,
      metadata: protectedResourceMetadata(config, service),
    });
  }
  const table = compileRoutes(GATEWAY_ROUTES, services);
  /** When each request arrived (only with the per-tool metric on). */
  const arrivals = new WeakMap<IncomingMessage, number>();
  const debug = log.isLevelEnabled('debug');

  /** Debug level only: a line per request costs throughput that info-level production logging should not pay. */
  function accessLog(req: IncomingMessage, res: ServerResponse, requestId: string): void {
    const started = performance.now();
    res.once('close', () => {
      log.debug(
        {
          reqId: requestId,
          method: req.method,
          path: pathOf(req.url),
          status: res.statusCode,
          completed: res.writableFinished,
          ms: Math.round((performance.now() - started) * 100) / 100,
        },
        'request',
      );
    });
  }

  function fail(
    req: IncomingMessage,
    res: ServerResponse,
    requestId: string,
    route: Route | undefined,
    err: unknown,
    bodyUnread = false,
  ): void {
    if (tracing) traceOf(res)?.fail(err instanceof GatewayError ? err.reason : 'internal_error');
    sendError(res, err, {
      requestId,
      method: req.method,
      path: pathOf(req.url),
      service: route?.service,
      log,
      bodyUnread,
    });
  }

  const forwarding: ForwardContext = {
    retryMs: config.upstreamRetryMs,
    log,
    fail: (req, res, requestId, service, err) => {
      if (tracing) traceOf(res)?.fail(err instanceof GatewayError ? err.reason : 'internal_error');
      sendError(res, err, { requestId, method: req.method, path: pathOf(req.url), service, log });
    },
  };
  const bodies = ctx.bodies;

  /** Public routes answered here: the body (if any) is read and dropped first, so the size limit holds here too. */
  function answer(
    req: IncomingMessage,
    res: ServerResponse,
    x: Exchange,
    body: string,
    headers: readonly string[] = [],
  ): void {
    bodies.read(req, x.h, (err) => {
      if (err) fail(req, res, x.requestId, x.route, err);
      else sendJsonBody(res, 200, body, ['x-request-id', x.requestId, ...headers]);
    });
  }

  /** The tool server's liveness: proxied without identity, its body bounded like any other. */
  function proxyHealth(req: IncomingMessage, res: ServerResponse, x: Exchange): void {
    const route = x.route!;
    bodies.read(req, x.h, (err, body) => {
      if (err) return fail(req, res, x.requestId, route, err);
      let path: string;
      try {
        path = upstreamPath(route, req.url!);
      } catch (e) {
        return fail(req, res, x.requestId, route, e);
      }
      x.h.forward.push('x-request-id', x.requestId);
      const { upstream } = route;
      forward(forwarding, req, res, { upstream, path, headers: x.h.forward, requestId: x.requestId, body });
    });
  }

  /**
   * Everything after signature verification, on every request, cached token or not; then the route's handler.
   * The DPoP proof comes last: it is per request (never cached), and a request refused by any local check never
   * costs the replay cache its Redis round trip.
   */
  function authorised(
    req: IncomingMessage,
    res: ServerResponse,
    x: Exchange,
    run: ProtectedHandler,
    presented: PresentedToken,
    t: VerifiedToken,
  ): void {
    const route = x.route!;
    checkAudience(config, route.service, t);
    // jti (lowercased), subject (and Entra object id) and forwarded-email cut-offs (revocation/mirror.ts).
    const status = revocation.check(t);
    if (status === 'revoked') throw new InvalidTokenError('token_revoked', 'token has been revoked');
    if (status === 'unknown') throw new RevocationUnavailableError();
    checkScope(route.service, t);
    x.bearer = presented.token;
    const proven = dpop(
      {
        presented,
        proof: x.h.dpop,
        proofRepeated: x.h.dpopRepeated,
        method: req.method!,
        path: pathOf(req.url),
      },
      t,
    );
    if (proven === undefined) run(req, res, x, t);
    else
      proven.then(
        () => run(req, res, x, t),
        (err: unknown) => fail(req, res, x.requestId, route, err, hasBody(x.h)),
      );
  }

  /** The protected route: the body read (only now: an anonymous caller cannot make the gateway buffer), signed, sent. */
  function proxy(req: IncomingMessage, res: ServerResponse, x: Exchange, t: VerifiedToken): void {
    const route = x.route!;
    const { service } = route;
    if (service.upstreamConnection !== undefined) {
      try {
        checkExchangeable(service, t);
      } catch (e) {
        return fail(req, res, x.requestId, route, e, hasBody(x.h));
      }
    }
    // One closure per request; the steps after it take the exchange as arguments.
    bodies.read(req, x.h, (err, body) => {
      if (err) fail(req, res, x.requestId, route, err);
      else proxyRead(req, res, x, t, body);
    });
  }

  /** The body in hand: the MCP headers held to it, traced, the policy's decision, then the limits. */
  function proxyRead(
    req: IncomingMessage,
    res: ServerResponse,
    x: Exchange,
    t: VerifiedToken,
    body: Buffer | null,
  ): void {
    const { h, requestId } = x;
    const route = x.route!;
    const { service } = route;
    const post = req.method === 'POST';
    if (h.mcpMethod !== undefined && post) {
      try {
        checkMcpHeaders(h, body);
      } catch (e) {
        return fail(req, res, requestId, route, e);
      }
    }
    if (tracing) {
      const trace = traceOf(res);
      if (trace) traceMcp(trace, mcpRequestInfo(body), req.headers['mcp-protocol-version']);
    }
    // The per-tool policy decides on the body (method, tool); without a policy file nothing is done here. The
    // rules and limits of one load decide the whole request, even when a reload lands meanwhile.
    const current = policy?.current;
    let calls: readonly RpcCall[] | undefined;
    // A 2026-07-28 request's Mcp-Method/Mcp-Name were just held to its body: decide on them, no second parse.
    const callsOf = (): readonly RpcCall[] =>
      (calls ??= h.mcpMethod !== undefined && post ? headerCalls(h) : rpcCalls(body ?? undefined));
    let narrow: ToolFilter | undefined;
    if (operations && post) operationTimer(req, res, service.name, callsOf());
    try {
      if (current !== undefined) {
        // A compressed body cannot be read here, so no rule could be applied to what it asks for.
        if (body !== null && contentEncoded(h.forward)) {
          throw new BadRequestError(
            'encoded_body',
            'a compressed request body cannot be checked against the tool policy; send it uncompressed',
          );
        }
        narrow = current.checkCalls(service.name, callsOf(), t);
      }
      x.path = upstreamPath(route, req.url!);
    } catch (refusal) {
      return fail(req, res, requestId, route, refusal);
    }
    // The per-tool metric's tool label is bounded by what the upstream lists: its tools/list answers are read.
    if (operations && callsOf().some((c) => c.method === 'tools/list')) {
      narrow = learningFilter((name) => operations.learn(service.name, name), narrow);
    }
    x.body = body;
    x.narrow = narrow;
    // `limits:` (gateway/limits/): counted once the request is allowed; beyond a limit the upstream never sees it
    // (nor is a user's upstream token exchanged for it).
    const limited = current?.limits?.check(service.name, callsOf, t);
    if (limited === undefined) withCredential(req, res, x, t);
    else
      limited.then(
        () => withCredential(req, res, x, t),
        (err: unknown) => fail(req, res, requestId, route, err),
      );
  }

  /**
   * The user's upstream token: cached (synchronous) or exchanged at the IdP. Not connected: the upstream is not
   * contacted, and an MCP request is told where to connect (−32042).
   */
  function withCredential(req: IncomingMessage, res: ServerResponse, x: Exchange, t: VerifiedToken): void {
    const route = x.route!;
    const { service } = route;
    if (service.upstreamConnection === undefined) return send(req, res, x, t, undefined);
    const refused = (e: unknown) => {
      if (e instanceof ConnectionRequiredError && req.method === 'POST') {
        e.rpcAnswer = elicitationAnswer(e, x.body);
      }
      fail(req, res, x.requestId, route, e);
    };
    let credential: UpstreamCredential | Promise<UpstreamCredential>;
    try {
      credential = upstreamAuth!.obtain(service, x.bearer!, t);
    } catch (e) {
      return refused(e);
    }
    if (credential instanceof Promise) credential.then((c) => send(req, res, x, t, c), refused);
    else send(req, res, x, t, credential);
  }

  function send(
    req: IncomingMessage,
    res: ServerResponse,
    x: Exchange,
    t: VerifiedToken,
    credential: UpstreamCredential | undefined,
  ): void {
    // The upstream's spans are children of this gateway span, not of the client's.
    if (tracing) {
      const trace = traceOf(res);
      if (trace) propagate(x.h.forward, trace.propagation());
    }
    if (x.route!.service.upstreamKind === 'remote') sendRemote(req, res, x, credential);
    else sendTool(req, res, x, t, credential);
  }

  /** To one of our tool servers: the caller's identity signed (v4 with an upstream token or an actor, else v3). */
  function sendTool(
    req: IncomingMessage,
    res: ServerResponse,
    x: Exchange,
    t: VerifiedToken,
    credential: UpstreamCredential | undefined,
  ): void {
    const { h, requestId, path, body } = x;
    const { upstream, service } = x.route!;
    const signed: SignedRequest = {
      service: service.name,
      method: req.method!,
      path,
      bodySha256: bodySha256(body),
    };
    pushIdentityHeaders(h.forward, service.identityKey, signed, {
      email: t.email,
      sub: t.sub,
      issuer: t.kind,
      scope: t.scope,
      clientId: t.clientId,
      jti: t.jti,
      requestId,
      // At least signature v3 (the entitlements line hashes '' when the token carries no `ent`).
      entitlements: t.entitlements,
      upstreamToken: credential?.token,
      upstreamTokenSha256: credential?.sha256,
      actor: t.actor,
    });
    forward(forwarding, req, res, {
      upstream,
      path,
      headers: h.forward,
      requestId,
      body,
      narrow: x.narrow,
      onUnauthorized: credential && (() => upstreamAuth!.refused(credential)),
    });
  }

  /**
   * To a third-party MCP server: nothing of the platform's (no `x-platform-*` header, never the platform token),
   * the user's upstream token as its bearer, its own Host (undici sets it from the upstream's URL), the body as it
   * came. Every gateway rule has already run in front of it.
   */
  function sendRemote(
    req: IncomingMessage,
    res: ServerResponse,
    x: Exchange,
    credential: UpstreamCredential | undefined,
  ): void {
    const { h, requestId } = x;
    const { upstream } = x.route!;
    h.forward.push('x-request-id', requestId);
    if (credential !== undefined) h.forward.push('authorization', `Bearer ${credential.token}`);
    forward(forwarding, req, res, {
      upstream,
      path: x.path,
      headers: h.forward,
      requestId,
      body: x.body,
      narrow: x.narrow,
      onUnauthorized: credential && (() => upstreamAuth!.refused(credential)),
    });
  }

  /** Observes the request's MCP operation when its answer ends (from arrival: the time the client waited). */
  function operationTimer(
    req: IncomingMessage,
    res: ServerResponse,
    service: string,
    calls: readonly RpcCall[],
  ): void {
    const call = calls[0];
    const method = call?.method;
    if (method === undefined) return;
    const started = arrivals.get(req) ?? performance.now();
    res.once('close', () =>
      operations!.observe(
        service,
        method,
        method === 'tools/call' ? (call!.tool ?? '') : undefined,
        res.statusCode,
        (performance.now() - started) / 1000,
      ),
    );
  }

  const publicHandlers: Record<PublicHandlerName, PublicHandler> = {
    health: (req, res, x) => answer(req, res, x, revocation.current === false ? RESYNCING_BODY : HEALTH_BODY),
    // Read by browser clients (the MCP Inspector) across origins: CORS from any origin, without credentials.
    live: (req, res, x) =>
      bodies.read(req, x.h, (err) => (err ? fail(req, res, x.requestId, x.route, err) : sendLive(res))),
    ready: (req, res, x) =>
      bodies.read(req, x.h, (err) => {
        if (err) fail(req, res, x.requestId, x.route, err);
        else void sendReady(res, ctx.readiness ?? {});
      }),
    metadata: (req, res, x) => answer(req, res, x, x.route!.metadata, ['access-control-allow-origin', '*']),
    serviceHealth: proxyHealth,
  };
  const protectedHandlers: Record<ProtectedHandlerName, ProtectedHandler> = { proxy };

  /** The dispatcher: the table's route, its service's Host guard, path safety, method, then public or protected. */
  function handle(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '';
    const h = scanRequestHeaders(req.rawHeaders);
    const requestId = h.requestId ?? randomUUID();
    if (debug) accessLog(req, res, requestId);
    if (operations) arrivals.set(req, performance.now());
    if (tracing) {
      new RequestTrace(tracing, req, res, req.method ?? 'HTTP', {
        'http.request.method': req.method,
        'platform.request_id': requestId,
      });
    }
    let route: Route | undefined;
    try {
      // Origin-form only: an absolute-form target or `*` has no place in front of MCP servers.
      if (url.charCodeAt(0) !== 47) {
        throw new BadRequestError('invalid_target', 'request target must be an absolute path');
      }
      const path = pathOf(url);
      const method = req.method!;
      // A CORS preflight for the protected-resource metadata (the only route browsers read across origins).
      if (
        method === 'OPTIONS' &&
        isMetadata(table.match('GET', path)) &&
        answerPreflight(req, res, READ_METHODS)
      )
        return;
      const matched = table.match(method, path);
      if (matched === undefined) {
        throw path.startsWith(`${METADATA_PATH}/`)
          ? new NotFoundError('no protected resource at this path')
          : new NotFoundError();
      }
      route = matched.service;
      if (tracing && route) {
        const trace = traceOf(res)!;
        trace.rename(`${method} /${route.service.name}${matched.prefix ? '/*' : ''}`);
        trace.set({ 'platform.service': route.service.name });
      }
      route?.checkHost(h.host);
      if (matched.prefix && UNSAFE_PATH.test(path)) {
        throw new BadRequestError('invalid_path', 'path has dot segments or encoded separators');
      }
      if (!matched.accepts(method)) throw new MethodNotAllowedError(matched.allow);
      const x: Exchange = { h, requestId, route, bearer: undefined, path: '', body: null, narrow: undefined };
      const { spec } = matched;
      if (spec.access === 'public') {
        publicHandlers[spec.handler](req, res, x);
        return;
      }
      // Protected: Origin, declared size, then the bearer; the handler runs once the caller is authorised.
      checkOrigin(route!.service, h.origin);
      if (h.contentLength !== undefined && Number(h.contentLength) > config.maxBodyBytes) {
        throw new PayloadTooLargeError(config.maxBodyBytes);
      }
      const run = protectedHandlers[spec.handler];
      const presented = presentedToken(h.authorization);
      const verified = verify(presented.token, route!.service);
      if (verified instanceof Promise) {
        verified.then(
          (t) => {
            try {
              authorised(req, res, x, run, presented, t);
            } catch (err) {
              fail(req, res, requestId, x.route, err, hasBody(h));
            }
          },
          (err: unknown) => fail(req, res, requestId, x.route, err, hasBody(h)),
        );
      } else {
        authorised(req, res, x, run, presented, verified);
      }
    } catch (err) {
      // Refused before its body was read (no bearer, bad token, wrong host, …): answered, then closed.
      fail(req, res, requestId, route, err, hasBody(h));
    }
  }

  return handle;
}

/**
 * The request target at the upstream. A tool server (and a remote upstream given without a path) sees the path
 * with the service prefix kept, under its URL's path. A remote upstream given with a path (`https://host/mcp`)
 * is reached at exactly that endpoint: `/<service>/mcp` is sent there (what follows it, and the query, appended);
 * nothing else under the prefix is proxied to it.
 */
function upstreamPath(route: Route, url: string): string {
  const endpoint = route.service.remoteEndpoint;
  if (endpoint === undefined) return route.upstream.basePath + url;
  const prefix = `/${route.service.name}/mcp`;
  if (url.startsWith(prefix)) {
    const rest = url.slice(prefix.length);
    if (rest === '') return endpoint;
    if (rest.charCodeAt(0) === 63 /* ? */) return endpoint + rest;
    if (rest.charCodeAt(0) === 47 /* / */) return endpoint.replace(/\/$/, '') + rest;
  }
  throw new NotFoundError(
    `${route.service.name} is a remote MCP server, reached at /${route.service.name}/mcp only`,
  );
}

/** The call a 2026-07-28 request names in its headers (checked against the body by checkMcpHeaders). */
function headerCalls(h: InboundHeaders): RpcCall[] {
  const method = h.mcpMethod;
  const tool = method === 'tools/call' && h.mcpName !== undefined ? decodeHeaderValue(h.mcpName) : undefined;
  return [{ method, tool }];
}

/**
 * Whether the request carries a Content-Encoding other than identity (only looked at under a policy; the header
 * scan has lowercased the forwarded names).
 */
function contentEncoded(headers: readonly string[]): boolean {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i] === 'content-encoding' && headers[i + 1]!.trim().toLowerCase() !== 'identity') {
      return true;
    }
  }
  return false;
}

/** Whether the request has a body to read (declared, or chunked). */
function hasBody(h: InboundHeaders): boolean {
  return h.chunked || (h.contentLength !== undefined && h.contentLength !== '0');
}

function isMetadata(route: { spec: RouteSpec } | undefined): boolean {
  return route?.spec.access === 'public' && route.spec.handler === 'metadata';
}

function pathOf(url: string | undefined): string {
  if (url === undefined) return '';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/** Replaces the client's trace context in the forwarded headers by the gateway span's. */
function propagate(headers: string[], context: { traceparent: string; tracestate?: string }): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) {
    if (headers[i] === 'traceparent' || headers[i] === 'tracestate') headers.splice(i, 2);
  }
  headers.push('traceparent', context.traceparent);
  if (context.tracestate) headers.push('tracestate', context.tracestate);
}
