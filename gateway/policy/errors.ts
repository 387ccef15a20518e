import { GatewayError } from '../errors.ts';

/** 403: a policy rule with `effect: deny` matched, or no rule matched. */
export class ForbiddenToolError extends GatewayError {
  readonly status = 403;
  readonly code = 'FORBIDDEN_TOOL';
  override readonly name = 'ForbiddenToolError';
  constructor(message: string) {
    super('policy_denied', message);
  }
}
