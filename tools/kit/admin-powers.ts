// Whether a caller may exercise a user's administrative powers at a tool server (e.g. mail's send-as). The
// email alone is not enough: an administrator's token held by a connector the administrator approved for a
// service would otherwise carry every power of the administrator (docs/tools.md § mail).
import { ADMIN_SCOPE, FIRST_PARTY_CLIENT } from '../../lib/admin-powers.ts';
import type { Identity } from '../../lib/identity.ts';

/**
 * True when the caller's email is in PLATFORM_ADMIN_EMAILS and the token carries the power: its forwarded scope
 * holds `power` (which the IdP grants a third-party client only after a consent page named it), or it is the
 * platform's own command-line client signed in with `platform:admin` (which the IdP issues to no other client
 * and never through the device flow).
 */
export function mayExercisePower(identity: Identity, power: string, adminEmails: readonly string[]): boolean {
  if (!adminEmails.includes(identity.email.toLowerCase())) return false;
  const scopes = identity.scope.split(' ');
  if (scopes.includes(power)) return true;
  return (
    identity.issuer === 'platform' && identity.clientId === FIRST_PARTY_CLIENT && scopes.includes(ADMIN_SCOPE)
  );
}
