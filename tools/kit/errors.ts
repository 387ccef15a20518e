import type { ServerResponse } from 'node:http';
import { HttpInputError, sendJson } from '../../lib/http.ts';
import type { Logger } from '../../lib/logger.ts';
import { traceOf } from '../../lib/telemetry/request.ts';

// HTTP-level refusals of a tool server. Each class carries its status and wire code; they become responses
// only in respondError below, with the spec's error body.

export class ToolHttpError extends Error {
  readonly status: number;
  readonly code: string;
  readonly headers: Readonly<Record<string, string>>;
  constructor(status: number, code: string, reason: string, headers: Record<string, string> = {}) {
    super(reason);
    this.name = 'ToolHttpError';
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

/** Identity headers missing, forged, made for another request or stale (docs/security.md). */
export class UnauthorizedError extends ToolHttpError {
  constructor(reason: string) {
    super(401, 'UNAUTHORIZED', reason);
  }
}

export class UserNotProvisionedError extends ToolHttpError {
  constructor(email: string) {
    super(401, 'USER_NOT_PROVISIONED', `user ${email} is not provisioned`);
  }
}

/** Host header outside the configured patterns (spec: 421 Invalid Host header). */
export class InvalidHostError extends ToolHttpError {
  constructor(host: string) {
    super(421, 'INVALID_HOST', `Invalid Host header: ${host}`);
  }
}

export class OriginNotAllowedError extends ToolHttpError {
  constructor(origin: string) {
    super(403, 'ORIGIN_NOT_ALLOWED', `origin ${origin} is not allowed`);
  }
}

export class NotFoundError extends ToolHttpError {
  constructor(path: string) {
    super(404, 'NOT_FOUND', `no route ${path}`);
  }
}

export class MethodNotAllowedError extends ToolHttpError {
  constructor(allow: readonly string[]) {
    super(405, 'METHOD_NOT_ALLOWED', `method not allowed; use ${allow.join(', ')}`, {
      allow: allow.join(', '),
    });
  }
}

/**
 * A refusal at the MCP transport level (no or unknown session, unparsable JSON-RPC). MCP clients expect a
 * JSON-RPC error object here, as the SDK's own transport answers, not the 401 error body.
 */
export class JsonRpcHttpError extends Error {
  readonly status: number;
  readonly rpcCode: number;
  constructor(status: number, rpcCode: number, message: string) {
    super(message);
    this.name = 'JsonRpcHttpError';
    this.status = status;
    this.rpcCode = rpcCode;
  }
}

export interface ErrorBody {
  error: { code: string; message: string; context: { request_id: string; reason: string } };
}

export function errorBody(code: string, reason: string, requestId: string): ErrorBody {
  // The spec: message is the reason text itself, never a fixed string; context repeats it.
  return { error: { code, message: reason, context: { request_id: requestId, reason } } };
}

/** The one place errors become HTTP responses. 4xx say what was wrong; 5xx say nothing of internals. */
export function respondError(
  res: ServerResponse,
  err: unknown,
  log: Logger,
  requestId: string,
  path: string,
): void {
  if (res.headersSent) {
    log.error({ err, path }, 'error after response started');
    res.destroy();
    return;
  }
  const headers = { 'cache-control': 'no-store' };
  traceOf(res)?.fail(errorType(err));
  if (err instanceof ToolHttpError) {
    // The spec: the same reason goes to the server log as a warning, with the request path.
    log.warn({ code: err.code, reason: err.message, path }, 'request refused');
    sendJson(res, err.status, errorBody(err.code, err.message, requestId), {
      ...headers,
      ...err.headers,
    });
    return;
  }
  if (err instanceof JsonRpcHttpError) {
    log.warn({ reason: err.message, path }, 'MCP request refused');
    sendJson(
      res,
      err.status,
      { jsonrpc: '2.0', error: { code: err.rpcCode, message: err.message }, id: null },
      headers,
    );
    return;
  }
  if (err instanceof HttpInputError) {
    log.warn({ reason: err.message, path }, 'bad request');
    sendJson(res, err.status, errorBody('BAD_REQUEST', err.message, requestId), headers);
    return;
  }
  log.error({ err, path }, 'unexpected error');
  sendJson(res, 500, errorBody('INTERNAL_ERROR', 'internal error', requestId), headers);
}

/** The span's `error.type`: the error body's code. */
function errorType(err: unknown): string {
  if (err instanceof ToolHttpError) return err.code;
  if (err instanceof JsonRpcHttpError) return 'JSONRPC_ERROR';
  if (err instanceof HttpInputError) return 'BAD_REQUEST';
  return 'INTERNAL_ERROR';
}
