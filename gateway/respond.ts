import type { ServerResponse } from 'node:http';
import type { Logger } from '../lib/logger.ts';
import type { ServiceConfig } from './config.ts';
import { DpopRefusedError, GATEWAY_DPOP_ALGORITHMS } from './dpop/check.ts';
import {
  ConnectionRequiredError,
  GatewayError,
  HEADER_MISMATCH_CODE,
  HeaderMismatchError,
  InsufficientScopeError,
  InvalidTokenError,
  MethodNotAllowedError,
  MissingTokenError,
  RateLimitedError,
} from './errors.ts';

export interface ErrorContext {
  requestId: string;
  method: string | undefined;
  path: string;
  service: ServiceConfig | undefined;
  log: Logger;
  /**
   * The request's body has not been read (the refusal came first): the connection is closed after the answer,
   * so a client sending (or trickling) the rest cannot hold it, and the gateway never waits for that rest.
   */
  bodyUnread?: boolean;
}

/** A quoted-string (RFC 9110 §5.6.4) that cannot break out of the WWW-Authenticate header. */
function quoted(text: string): string {
  return `"${text.replace(/[^\x20-\x7E]|["\\]/g, '').slice(0, 200)}"`;
}

/** `WWW-Authenticate` for a 401/403 (RFC 6750 §3, RFC 9728 §5.1). */
function challenge(err: GatewayError, service: ServiceConfig): string {
  let value = `Bearer resource_metadata=${quoted(service.resourceMetadataUrl)}`;
  // A refused DPoP proof is the DPoP challenge's error (below), not the Bearer one's.
  if (err instanceof InvalidTokenError && !(err instanceof DpopRefusedError))
    value += `, error="invalid_token", error_description=${quoted(err.message)}`;
  else if (err instanceof InsufficientScopeError)
    value += `, error="insufficient_scope", scope=${quoted(err.scope)}`;
  return value;
}

const DPOP_CHALLENGE = `DPoP algs="${GATEWAY_DPOP_ALGORITHMS.join(' ')}"`;

/** The DPoP challenge every 401 carries beside the Bearer one (RFC 9449 §7.1), with the proof's error if any. */
function dpopChallenge(err: GatewayError): string {
  if (!(err instanceof DpopRefusedError)) return DPOP_CHALLENGE;
  return `${DPOP_CHALLENGE}, error="${err.dpopError}", error_description=${quoted(err.message)}`;
}

export function sendJsonBody(res: ServerResponse, status: number, body: string, headers: string[]): void {
  headers.push('content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)));
  res.writeHead(status, headers);
  res.end(body);
}

/**
 * The one place a refusal becomes a response: the spec's body
 * `{"error":{"code","message","context":{"request_id","reason"}}}`, the challenge header for 401/403, and one
 * warning line with the reason and the path. Anything that is not a GatewayError is a fault of ours: a
 * generic 500 whose body says nothing of internals, logged as an error.
 */
export function sendError(res: ServerResponse, err: unknown, x: ErrorContext): void {
  if (res.headersSent) {
    x.log.error({ reqId: x.requestId, err }, 'error after the response started');
    res.destroy();
    return;
  }
  const headers: string[] = ['x-request-id', x.requestId];
  let status: number;
  let code: string;
  let message: string;
  let reason: string;
  if (err instanceof GatewayError) {
    ({ status, code, message, reason } = err);
    if (
      x.service &&
      (err instanceof MissingTokenError ||
        err instanceof InvalidTokenError ||
        err instanceof InsufficientScopeError)
    ) {
      headers.push('www-authenticate', challenge(err, x.service));
      // A browser client must be able to read the challenges (and resource_metadata, DPoP-Nonce) across origins.
      if (status === 401) {
        headers.push('www-authenticate', dpopChallenge(err));
        if (err instanceof DpopRefusedError && err.nonce !== undefined) headers.push('dpop-nonce', err.nonce);
        headers.push(
          'access-control-allow-origin',
          '*',
          'access-control-expose-headers',
          'WWW-Authenticate, DPoP-Nonce',
        );
      }
    }
    if (err instanceof MethodNotAllowedError) headers.push('allow', err.allow);
    if (err instanceof RateLimitedError) headers.push(...err.headers());
    if (status === 503) headers.push('retry-after', '2');
    // The unread remainder of a refused or stalled body is not worth draining over a keep-alive connection.
    if (status === 413 || status === 408 || x.bodyUnread) headers.push('connection', 'close');
    x.log.warn(
      { reqId: x.requestId, method: x.method, path: x.path, service: x.service?.name, status, code, reason },
      message,
    );
  } else {
    status = 500;
    code = 'INTERNAL_ERROR';
    message = 'internal error';
    reason = 'internal_error';
    x.log.error({ reqId: x.requestId, method: x.method, path: x.path, err }, 'unexpected error');
    if (x.bodyUnread) headers.push('connection', 'close');
  }
  let body: string;
  if (err instanceof HeaderMismatchError) {
    body = JSON.stringify({ jsonrpc: '2.0', id: err.rpcId, error: { code: HEADER_MISMATCH_CODE, message } });
  } else if (err instanceof ConnectionRequiredError) {
    // An MCP request gets its JSON-RPC answer (−32042, a URL elicitation) with HTTP 200, as MCP clients read it.
    if (err.rpcAnswer !== undefined) {
      status = 200;
      body = err.rpcAnswer;
    } else {
      const context = {
        request_id: x.requestId,
        reason,
        connection: err.connection,
        connect_uri: err.connectUri,
      };
      body = JSON.stringify({ error: { code, message, context } });
    }
  } else {
    body = JSON.stringify({ error: { code, message, context: { request_id: x.requestId, reason } } });
  }
  sendJsonBody(res, status, body, headers);
}
