import { GatewayError } from '../errors.ts';

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
