import { GatewayError } from '../errors.ts';

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
