// One class per RFC 6749 / 7009 / 7591 / 8707 error code; each knows its HTTP status. They become wire
// responses in exactly one place (app.ts), as `{error, error_description}`.

export class OAuthError extends Error {
  readonly error: string;
  readonly status: number;
  /** Members the error body carries beside `error` and `error_description` (e.g. `connect_uri`). */
  readonly members: Readonly<Record<string, string>> | undefined;
  constructor(error: string, description: string, status = 400, members?: Record<string, string>) {
    super(description);
    this.name = 'OAuthError';
    this.error = error;
    this.status = status;
    this.members = members;
  }
}

export class InvalidRequestError extends OAuthError {
  constructor(description: string, status = 400) {
    super('invalid_request', description, status);
  }
}
export class InvalidClientError extends OAuthError {
  constructor(description: string) {
    super('invalid_client', description, 401);
  }
}
export class InvalidGrantError extends OAuthError {
  constructor(description: string) {
    super('invalid_grant', description);
  }
}
export class UnauthorizedClientError extends OAuthError {
  constructor(description: string) {
    super('unauthorized_client', description);
  }
}
export class UnsupportedGrantTypeError extends OAuthError {
  constructor(description: string) {
    super('unsupported_grant_type', description);
  }
}
export class UnsupportedResponseTypeError extends OAuthError {
  constructor(description: string) {
    super('unsupported_response_type', description);
  }
}
export class UnsupportedTokenTypeError extends OAuthError {
  constructor(description: string) {
    super('unsupported_token_type', description);
  }
}
export class InvalidScopeError extends OAuthError {
  constructor(description: string) {
    super('invalid_scope', description);
  }
}
export class InvalidTargetError extends OAuthError {
  constructor(description: string) {
    super('invalid_target', description);
  }
}
/**
 * The token exchange for a connection (idp/token-exchange): the user has not connected, or the upstream refused
 * the stored grant; `connect_uri` says where the user connects (again).
 */
export class InteractionRequiredError extends OAuthError {
  constructor(description: string, connectUri: string) {
    super('interaction_required', description, 400, { connect_uri: connectUri });
  }
}
export class LoginRequiredError extends OAuthError {
  constructor(description: string) {
    super('login_required', description);
  }
}
export class ConsentRequiredError extends OAuthError {
  constructor(description: string) {
    super('consent_required', description);
  }
}
export class AccessDeniedError extends OAuthError {
  constructor(description: string) {
    super('access_denied', description);
  }
}
export class InvalidRedirectUriError extends OAuthError {
  constructor(description: string) {
    super('invalid_redirect_uri', description);
  }
}
export class InvalidClientMetadataError extends OAuthError {
  constructor(description: string) {
    super('invalid_client_metadata', description);
  }
}
/** 400 from a protected resource (RFC 6750 §3.1): answered with `WWW-Authenticate: Bearer error="invalid_request"`. */
export class InvalidBearerRequestError extends InvalidRequestError {}
export class InvalidTokenError extends OAuthError {
  constructor(description: string) {
    super('invalid_token', description, 401);
  }
}
/** 403: a valid token that lacks what the request needs (RFC 6750 §3.1). */
export class InsufficientScopeError extends OAuthError {
  constructor(description: string) {
    super('insufficient_scope', description, 403);
  }
}
export class TemporarilyUnavailableError extends OAuthError {
  constructor(description: string) {
    super('temporarily_unavailable', description, 503);
  }
}
export class NotFoundError extends OAuthError {
  constructor(description: string) {
    super('not_found', description, 404);
  }
}
export class MethodNotAllowedError extends OAuthError {
  readonly allow: string;
  constructor(allow: string) {
    super('invalid_request', `method not allowed; use ${allow}`, 405);
    this.allow = allow;
  }
}

/**
 * An authorize-endpoint error that must NOT be redirected: client_id or redirect_uri could not be trusted,
 * so it is shown to the user as a plain 400 page (RFC 6749 §4.1.2.1; never an open redirect).
 */
export class AuthorizePageError extends Error {
  readonly status: number;
  /** Seconds, sent as Retry-After (a 429 page). */
  readonly retryAfter: number | undefined;
  constructor(message: string, status = 400, retryAfter?: number) {
    super(message);
    this.name = 'AuthorizePageError';
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

/**
 * A DPoP problem at a protected route of the provider (userinfo, admin API; RFC 9449 §7.1): 401 with
 * `WWW-Authenticate: DPoP error="…", algs="…"`. `invalid_token` also for a DPoP-bound token sent as Bearer;
 * `use_dpop_nonce` with a fresh `DPoP-Nonce` (RFC 9449 §9) when PLATFORM_DPOP_NONCE is on.
 */
export class DpopTokenError extends OAuthError {
  /** `use_dpop_nonce` (PLATFORM_DPOP_NONCE=on): the nonce the next proof must carry, sent as `DPoP-Nonce`. */
  readonly nonce: string | undefined;
  constructor(
    error: 'invalid_token' | 'invalid_dpop_proof' | 'use_dpop_nonce',
    description: string,
    nonce?: string,
  ) {
    super(error, description, 401);
    this.nonce = nonce;
  }
}
