// Every refusal the gateway sends is one of these; gateway/respond.ts turns them into the wire body
// `{"error":{"code","message","context":{"request_id","reason"}}}` in one place. `reason` is a stable
// snake_case identifier (tests and operators match on it); `message` is the specific human-readable text.

export abstract class GatewayError extends Error {
  abstract readonly status: number;
  abstract readonly code: string;
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.reason = reason;
  }
}

/** 421: the Host header names no host this service answers for (DNS-rebinding guard). */
export class InvalidHostError extends GatewayError {
  readonly status = 421;
  readonly code = 'INVALID_HOST';
  override readonly name = 'InvalidHostError';
  constructor() {
    super('host_not_allowed', 'Invalid Host header');
  }
}

/** 403: a browser Origin the service does not allow. */
export class InvalidOriginError extends GatewayError {
  readonly status = 403;
  readonly code = 'INVALID_ORIGIN';
  override readonly name = 'InvalidOriginError';
  constructor() {
    super('origin_not_allowed', 'Invalid Origin header');
  }
}

export class NotFoundError extends GatewayError {
  readonly status = 404;
  readonly code = 'NOT_FOUND';
  override readonly name = 'NotFoundError';
  constructor(message = 'no service at this path') {
    super('unknown_route', message);
  }
}

export class BadRequestError extends GatewayError {
  readonly status = 400;
  readonly code = 'BAD_REQUEST';
  override readonly name = 'BadRequestError';
}

export class MethodNotAllowedError extends GatewayError {
  readonly status = 405;
  readonly code = 'METHOD_NOT_ALLOWED';
  override readonly name = 'MethodNotAllowedError';
  readonly allow: string;
  constructor(allow: string) {
    super('method_not_allowed', `method not allowed here; allowed: ${allow}`);
    this.allow = allow;
  }
}

export class PayloadTooLargeError extends GatewayError {
  readonly status = 413;
  readonly code = 'PAYLOAD_TOO_LARGE';
  override readonly name = 'PayloadTooLargeError';
  constructor(limit: number) {
    super('body_too_large', `request body exceeds ${limit} bytes`);
  }
}

/** 503 instead of a bare 502: the tool server did not answer (docs/reference.md § Errors). */
export class UpstreamUnavailableError extends GatewayError {
  readonly status = 503;
  readonly code = 'UPSTREAM_UNAVAILABLE';
  override readonly name = 'UpstreamUnavailableError';
}

/** 408: the request body did not arrive whole within GATEWAY_BODY_TIMEOUT_MS (a slow or stalled sender). */
export class BodyTimeoutError extends GatewayError {
  readonly status = 408;
  readonly code = 'REQUEST_TIMEOUT';
  override readonly name = 'BodyTimeoutError';
  constructor(timeoutMs: number) {
    super('body_timeout', `request body did not arrive within ${timeoutMs} ms`);
  }
}

/**
 * 400 with a JSON-RPC error (−32020 HeaderMismatch), not the gateway's error body: MCP 2026-07-28 clients read
 * the JSON-RPC error to tell a header problem from an older server (proxy/mcp-headers.ts).
 */
export class HeaderMismatchError extends GatewayError {
  readonly status = 400;
  readonly code = 'HEADER_MISMATCH';
  override readonly name = 'HeaderMismatchError';
  /** The JSON-RPC id of the refused request, when the body had one. */
  readonly rpcId: string | number | null;
  constructor(rpcId: string | number | null, message: string) {
    super('mcp_header_mismatch', message);
    this.rpcId = rpcId;
  }
}

/** The JSON-RPC error code of HeaderMismatchError (MCP 2026-07-28). */
export const HEADER_MISMATCH_CODE = -32020;

// Services with an upstream connection (gateway/upstream-auth/): the user's token for the system behind the
// service is obtained by exchanging the platform token at the IdP (RFC 8693).

/**
 * 403 (or, for an MCP request, HTTP 200 with the JSON-RPC error −32042 and a URL elicitation): the user has not
 * connected the service's upstream connection, or the upstream refused the stored grant. The upstream is not
 * contacted; `connectUri` is where the user connects.
 */
export class ConnectionRequiredError extends GatewayError {
  readonly status = 403;
  readonly code = 'CONNECTION_REQUIRED';
  override readonly name = 'ConnectionRequiredError';
  readonly connection: string;
  readonly connectUri: string;
  /** The JSON-RPC answer (−32042) when the request was an MCP request; undefined: the 403 body. */
  rpcAnswer: string | undefined;
  constructor(connection: string, connectUri: string, service: string) {
    super(
      'connection_required',
      `${service} acts as you on ${connection}: connect ${connection} at ${connectUri}, then retry`,
    );
    this.connection = connection;
    this.connectUri = connectUri;
  }
}

/** The JSON-RPC error code of ConnectionRequiredError: MCP URL elicitation required. */
export const URL_ELICITATION_REQUIRED_CODE = -32042;

/** 403: only platform tokens can be exchanged for a user's upstream token (an Entra or a service token was given). */
export class ConnectionUnavailableError extends GatewayError {
  readonly status = 403;
  readonly code = 'CONNECTION_UNAVAILABLE';
  override readonly name = 'ConnectionUnavailableError';
}

/**
 * 502: the upstream answered 401 to the user's upstream token. The gateway forgot that token (the next request
 * exchanges afresh) and did not retry: the upstream may have acted on the request.
 */
export class UpstreamAuthFailedError extends GatewayError {
  readonly status = 502;
  readonly code = 'UPSTREAM_AUTH_FAILED';
  override readonly name = 'UpstreamAuthFailedError';
}

/**
 * 503: the IdP's token endpoint could not exchange the token for a reason that is not the user's (unreachable,
 * 5xx, the gateway's client refused, an unusable answer). Logged for the operator; the client may retry.
 */
export class ExchangeUnavailableError extends GatewayError {
  readonly status = 503;
  readonly code = 'EXCHANGE_UNAVAILABLE';
  override readonly name = 'ExchangeUnavailableError';
}
