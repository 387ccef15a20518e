// The scopes that carry a user's administrative powers: the IdP grants them (idp/scopes.ts), the admin API and
// the tool servers honour them (tools/kit/admin-powers.ts). docs/idp.md § Consent and docs/tools.md § mail.

/** The admin API; only the first-party command-line client ever holds it, and never through the device flow. */
export const ADMIN_SCOPE = 'platform:admin';

/**
 * `as_user_email` at the mail server: send mail and create calendar events as any other user. Not `mcp:`
 * prefixed, because `mcp:<name>` always names a service. Granted only to an administrator who asked for it, and
 * to a third-party client only after a consent page that named it.
 */
export const SEND_AS_SCOPE = 'mail:send_as';

/** The first-party command-line client: no consent page, and the only holder of `platform:admin`. */
export const FIRST_PARTY_CLIENT = 'platform-cli';

/** Every scope that carries administrative powers (never part of "no scope asked means everything"). */
export const ADMIN_POWER_SCOPES: readonly string[] = [ADMIN_SCOPE, SEND_AS_SCOPE];
