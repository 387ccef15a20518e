import type { IncomingMessage, ServerResponse } from 'node:http';
import { allowAnyOrigin, answerPreflight } from '../lib/cors.ts';
import { isDatabaseUnavailable } from '../lib/db.ts';
import { HttpInputError, requestId, sendJson } from '../lib/http.ts';
import { flatLines, type Logger, lazyChild } from '../lib/logger.ts';
import type { Tracing } from '../lib/telemetry/index.ts';
import { RequestTrace, traceOf } from '../lib/telemetry/request.ts';
import type { IdpContext } from './context.ts';
import { IDP_DPOP_ALGORITHMS } from './dpop/index.ts';
import {
  AuthorizePageError,
  DpopTokenError,
  InvalidBearerRequestError,
  MethodNotAllowedError,
  NotFoundError,
  OAuthError,
} from './errors.ts';
import { refusedPage, sendPage } from './pages/html.ts';
import { RateLimitedError } from './rate-limit.ts';
import { CORS_PATHS, findRoute, routes } from './routes.ts';

const DPOP_ALGS = `algs="${IDP_DPOP_ALGORITHMS.join(' ')}"`;
/** The DPoP challenge beside the Bearer one on a protected route's 401 (userinfo, admin API). */
const DPOP_CHALLENGE = `DPoP ${DPOP_ALGS}`;

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Headers every provider response carries, set before any handler runs so that no route, error or page can
 * miss them. JSON and text keep this policy; an HTML page replaces it with its own (pages/html.ts), which
 * keeps frame-ancestors 'none'.
 */
export const RESPONSE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
});

export function withResponseHeaders(next: Handler): Handler {
  return (req, res) => {
    for (const [name, value] of Object.entries(RESPONSE_HEADERS)) res.setHeader(name, value);
    next(req, res);
  };
}

/** The provider as a request handler; main.ts owns the process, the port and shutdown. */
export function createIdpHandler(ctx: IdpContext, log: Logger, tracing?: Tracing): Handler {
  const table = routes(ctx.config);
  // The access line holds the request's id, method, path (no query), status and time: flat fields, written
  // without the redaction pass (lib/logger.ts flatLines), a share of every request's CPU (docs/performance.md).
  const accessLog = flatLines(log);
  return (req, res) => {
    const id = requestId(req);
    // The request's logger (its lines carry reqId) is made when a line other than the access line needs it: most
    // requests log only that line, written below with reqId as a field (the same JSON line), so a child logger
    // per request was mostly built and dropped.
    const reqLog = lazyChild(log, { reqId: id });
    const started = process.hrtime.bigint();
    res.setHeader('x-request-id', id);
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://idp.invalid');
    } catch {
      return sendJson(res, 400, { error: 'invalid_request', error_description: 'malformed request target' });
    }
    res.once('finish', () => {
      accessLog.info(
        {
          reqId: id,
          method: req.method,
          path: url.pathname,
          status: res.statusCode,
          ms: Number(process.hrtime.bigint() - started) / 1e6,
        },
        'request',
      );
    });
    const entry = findRoute(table, url.pathname);
    if (tracing) {
      // The route as the table names it (never the path itself: admin paths carry emails, queries carry codes).
      const route = routeOf(table, url.pathname, entry !== undefined);
      new RequestTrace(tracing, req, res, route ? `${req.method} ${route}` : (req.method ?? 'HTTP'), {
        'http.request.method': req.method,
        'http.route': route,
        'platform.request_id': id,
      });
    }
    if (entry && CORS_PATHS.has(url.pathname)) {
      if (answerPreflight(req, res, Object.keys(entry))) return;
      allowAnyOrigin(res, 'www-authenticate');
    }
    const run = async () => {
      if (!entry) throw new NotFoundError(`no route ${url.pathname}`);
      const endpoint = req.method ? entry[req.method] : undefined;
      if (!endpoint) throw new MethodNotAllowedError(Object.keys(entry).join(', '));
      await endpoint(ctx, {
        req,
        res,
        url,
        get log() {
          return reqLog();
        },
        requestId: id,
      });
    };
    run().catch((err: unknown) => respondError(res, err, reqLog()));
  };
}

/**
 * The table's key for a path: itself, or the mount it falls under (`/admin/api/*`, `/admin/*`, else its first
 * segment's): never the rest of the path, which may name a user.
 */
function routeOf(table: ReadonlyMap<string, unknown>, path: string, routed: boolean): string | undefined {
  if (table.has(path)) return path;
  if (!routed) return undefined;
  if (path.startsWith('/admin/api/')) return '/admin/api/*';
  if (path.startsWith('/admin/')) return '/admin/*';
  return `/${path.split('/')[1]}/*`;
}

/** The span's `error.type`: the OAuth error code the response carries. */
function errorType(err: unknown): string {
  if (err instanceof OAuthError) return err.error;
  if (err instanceof HttpInputError) return 'invalid_request';
  if (err instanceof AuthorizePageError) return err.status === 429 ? 'rate_limited' : 'authorization_refused';
  if (isDatabaseUnavailable(err)) return 'temporarily_unavailable';
  return 'server_error';
}

/** The one place errors become responses. 4xx say what was wrong; 5xx say nothing of internals. */
function respondError(res: ServerResponse, err: unknown, log: Logger): void {
  traceOf(res)?.fail(errorType(err));
  if (res.headersSent) {
    log.error({ err }, 'error after response started');
    res.destroy();
    return;
  }
  const headers: Record<string, string | string[]> = { 'cache-control': 'no-store' };
  if (err instanceof AuthorizePageError) {
    log.warn({ reason: err.message }, 'authorization request refused');
    if (err.retryAfter !== undefined) res.setHeader('retry-after', String(err.retryAfter));
    return sendPage(res, err.status, refusedPage(err.message));
  }
  if (err instanceof HttpInputError) {
    log.warn({ reason: err.message }, 'bad request');
    // A body too slow or too large is not read further: the connection ends with this answer.
    if (err.status === 408 || err.status === 413) headers.connection = 'close';
    return sendJson(res, err.status, { error: 'invalid_request', error_description: err.message }, headers);
  }
  if (err instanceof OAuthError) {
    if (err.status >= 500) log.error({ err }, 'request failed');
    else log.warn({ error: err.error, reason: err.message }, 'request refused');
    if (err instanceof MethodNotAllowedError) headers.allow = err.allow;
    if (err instanceof RateLimitedError) headers['retry-after'] = String(err.retryAfter);
    // A protected route's 401 names both schemes it accepts (RFC 9449 §7.1), as the gateway's do.
    if (err.error === 'invalid_token')
      headers['www-authenticate'] = [`Bearer error="invalid_token"`, DPOP_CHALLENGE];
    if (err.error === 'insufficient_scope') headers['www-authenticate'] = `Bearer error="insufficient_scope"`;
    if (err.error === 'invalid_client') headers['www-authenticate'] = 'Bearer';
    if (err instanceof InvalidBearerRequestError)
      headers['www-authenticate'] = `Bearer error="invalid_request"`;
    if (err instanceof DpopTokenError) {
      headers['www-authenticate'] = `DPoP error="${err.error}", ${DPOP_ALGS}`;
      if (err.nonce !== undefined) headers['dpop-nonce'] = err.nonce;
    }
    return sendJson(
      res,
      err.status,
      { error: err.error, error_description: err.message, ...err.members },
      headers,
    );
  }
  if (isDatabaseUnavailable(err)) {
    log.warn({ err: { message: (err as Error).message } }, 'database unavailable');
    return sendJson(
      res,
      503,
      { error: 'temporarily_unavailable', error_description: 'the database is unavailable; retry shortly' },
      { ...headers, 'retry-after': '2' },
    );
  }
  log.error({ err }, 'unexpected error');
  sendJson(res, 500, { error: 'server_error', error_description: 'internal error' }, headers);
}
