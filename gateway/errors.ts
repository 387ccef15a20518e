// Every refusal the gateway sends is one of these, in this one module (the routes', the bearer's, the policy's, the
// limits', the upstreams'); gateway/respond.ts turns them into the wire body
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

// The bearer (gateway/auth).

// The bearer failures. 401s carry `WWW-Authenticate: Bearer resource_metadata=…` (plus error="invalid_token"
// when a token was given); 403 insufficient_scope names the scope to ask for (RFC 6750 §3.1).

export class MissingTokenError extends GatewayError {
  readonly status = 401;
  readonly code = 'MISSING_TOKEN';
  override readonly name = 'MissingTokenError';
}

export class InvalidTokenError extends GatewayError {
  readonly status = 401;
  readonly code = 'INVALID_TOKEN';
  override readonly name = 'InvalidTokenError';
}

export class InsufficientScopeError extends GatewayError {
  readonly status = 403;
  readonly code = 'INSUFFICIENT_SCOPE';
  override readonly name = 'InsufficientScopeError';
  /** The scope the client should obtain (`mcp:<service>` or `<app id uri>/mcp.access`). */
  readonly scope: string;
  constructor(scope: string) {
    super('insufficient_scope', `token lacks the scope ${scope}`);
    this.scope = scope;
  }
}

/**
 * 503: the issuer's key set has never been fetched successfully, so no token of it can be checked. This is the
 * gateway's fault, not the client's; a 401 would make clients throw away good credentials.
 */
export class KeysUnavailableError extends GatewayError {
  readonly status = 503;
  readonly code = 'JWKS_UNAVAILABLE';
  override readonly name = 'KeysUnavailableError';
}

/** 503 in `fail-closed` mode while the revocation mirror is not known to be current (Redis unreachable). */
export class RevocationUnavailableError extends GatewayError {
  readonly status = 503;
  readonly code = 'REVOCATION_UNAVAILABLE';
  override readonly name = 'RevocationUnavailableError';
  constructor() {
    super('revocation_state_unknown', 'revocation state is unavailable (Redis unreachable); retry shortly');
  }
}

// The per-tool policy (gateway/policy).

/** 403: a policy rule with `effect: deny` matched, or no rule matched. */
export class ForbiddenToolError extends GatewayError {
  readonly status = 403;
  readonly code = 'FORBIDDEN_TOOL';
  override readonly name = 'ForbiddenToolError';
  constructor(message: string) {
    super('policy_denied', message);
  }
}

// The policy file's `limits:` (gateway/limits).

export interface RateLimitState {
  /** The limit's name in the headers: `limit-<its 1-based position in limits:>`. */
  policy: string;
  quota: number;
  /** The window, in seconds. */
  window: number;
  remaining: number;
  /** Seconds until the window ends and the quota is whole again (at least 1). */
  resetSeconds: number;
  per: 'email' | 'client';
}

/**
 * 429: a `limits:` entry of the policy file is used up. The response carries Retry-After and the IETF httpapi
 * RateLimit header fields (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy: "<name>";q=<quota>;w=<window>`
 * and `RateLimit: "<name>";r=<remaining>;t=<seconds to reset>`.
 */
export class RateLimitedError extends GatewayError {
  readonly status = 429;
  readonly code = 'RATE_LIMITED';
  override readonly name = 'RateLimitedError';
  readonly state: RateLimitState;
  constructor(state: RateLimitState) {
    super(
      'rate_limited',
      `rate limit ${state.policy} (${state.quota} per ${state.window} s per ${state.per}) reached; retry in ${state.resetSeconds} s`,
    );
    this.state = state;
  }

  /** The response headers, as name/value pairs. */
  headers(): string[] {
    const s = this.state;
    return [
      'retry-after',
      String(s.resetSeconds),
      'ratelimit-policy',
      `"${s.policy}";q=${s.quota};w=${s.window}`,
      'ratelimit',
      `"${s.policy}";r=${s.remaining};t=${s.resetSeconds}`,
    ];
  }
}
