import { SEND_AS_SCOPE } from '../../lib/admin-powers.ts';
import type { Identity } from '../../lib/identity.ts';
import { mayExercisePower } from '../kit/admin-powers.ts';
import { ToolError } from '../kit/tool-errors.ts';

/** Send-as refused (spec: 403 `send_as_forbidden`); inside MCP it is a tool error with that code. */
export class SendAsForbiddenError extends ToolError {
  constructor() {
    super(
      'send_as_forbidden',
      `as_user_email is for platform admins whose token carries ${SEND_AS_SCOPE}; omit it to act as yourself`,
      403,
    );
  }
}

export interface Sender {
  /** The mailbox the message or event goes out from. */
  email: string;
  /** True when it is not the caller's own mailbox. */
  sendAs: boolean;
}

/**
 * Whose mailbox a call uses. Naming yourself in `as_user_email` is not send-as; naming someone else needs the
 * caller's email in PLATFORM_ADMIN_EMAILS (compared case-insensitively) and the power in the token
 * (mayExercisePower: scope `mail:send_as`, or the platform's command-line client with `platform:admin`).
 */
export function resolveSender(
  identity: Identity,
  asUserEmail: string | undefined,
  adminEmails: readonly string[],
): Sender {
  const self = identity.email.toLowerCase();
  const requested = asUserEmail?.trim().toLowerCase();
  if (!requested || requested === self) return { email: self, sendAs: false };
  if (!mayExercisePower(identity, SEND_AS_SCOPE, adminEmails)) throw new SendAsForbiddenError();
  return { email: requested, sendAs: true };
}
