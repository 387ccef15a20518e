import { ADMIN_POWER_SCOPES, ADMIN_SCOPE, FIRST_PARTY_CLIENT, SEND_AS_SCOPE } from '../lib/admin-powers.ts';
import { InvalidScopeError } from './errors.ts';

export const IDENTITY_SCOPES = ['openid', 'profile', 'email'] as const;
/** OIDC Core §11: asks for a refresh token. Accepted and granted when asked; refresh tokens are issued either way. */
export const OFFLINE_ACCESS = 'offline_access';
export { ADMIN_SCOPE, SEND_AS_SCOPE };

/**
 * The clients that may hold `platform:admin`: the first-party command-line client, which the user runs
 * themselves and which needs no consent. A third-party client never gets it, even for an admin who asked
 * through it: the consent page approves services, and approving a connector for mail must not hand it
 * the administration of the platform (nor may a silent `prompt=none` request add it later).
 */
export const ADMIN_CLIENTS: ReadonlySet<string> = new Set([FIRST_PARTY_CLIENT]);

const NO_POWERS: ReadonlySet<string> = new Set();
const ADMIN_POWERS = new Set(ADMIN_POWER_SCOPES);

/**
 * The administrative scopes a token for this user, issued to this client through this grant, may carry:
 * none for a user outside PLATFORM_ADMIN_EMAILS, and none through the device authorization grant (a device
 * code is phishable: whoever started the flow gets what the approver has, RFC 8628 §5.4). Otherwise
 * `mail:send_as` (a third-party client still needs the consent page to have named it), and `platform:admin`
 * for the first-party client only.
 */
export function adminPowers(
  config: { adminEmails: ReadonlySet<string> },
  who: { email: string; clientId: string; grant?: 'device_code' },
): ReadonlySet<string> {
  if (who.grant === 'device_code' || !config.adminEmails.has(who.email.trim().toLowerCase()))
    return NO_POWERS;
  return ADMIN_CLIENTS.has(who.clientId) ? ADMIN_POWERS : new Set([SEND_AS_SCOPE]);
}

export const serviceScope = (service: string) => `mcp:${service}`;

/** Every scope the provider grants; `mail:send_as` only when the mail service is configured. */
export function supportedScopes(services: readonly string[]): string[] {
  return [
    ...IDENTITY_SCOPES,
    OFFLINE_ACCESS,
    ...services.map(serviceScope),
    ADMIN_SCOPE,
    ...(services.includes('mail') ? [SEND_AS_SCOPE] : []),
  ];
}

export function parseScope(value: string | undefined | null): string[] {
  if (value === undefined || value === null) return [];
  return [...new Set(value.split(' ').filter((s) => s !== ''))];
}

export interface GrantScopeOptions {
  requested: string[];
  services: readonly string[];
  entitled: ReadonlySet<string>;
  /** The administrative scopes that may be granted if asked for (adminPowers). */
  powers: ReadonlySet<string>;
}

/** RFC 6749 §3.3: a scope token is printable ASCII without space, `"` or `\`. */
function checkSyntax(requested: readonly string[]): void {
  for (const s of requested) {
    if (!/^[\x21\x23-\x5B\x5D-\x7E]+$/.test(s))
      throw new InvalidScopeError('scope contains a character RFC 6749 §3.3 forbids');
  }
}

/**
 * The requested scopes this provider knows, in the order asked; unknown ones are dropped, never an error
 * (clients ask for what other servers offer: Gemini CLI every scope in scopes_supported, Codex the
 * server-level ones). A scope with a character RFC 6749 §3.3 forbids is still `invalid_scope`.
 */
export function knownScopes(requested: readonly string[], services: readonly string[]): string[] {
  checkSyntax(requested);
  const supported = new Set(supportedScopes(services));
  return requested.filter((s) => supported.has(s));
}

/**
 * The granted scope: what was asked (every identity and service scope when nothing, or only
 * `offline_access`, was), minus unknown scopes, minus services the user is not entitled to, minus
 * administrative scopes unless asked for and within `powers`; `mail:send_as` only beside `mcp:mail`. The
 * response's `scope` says what was granted.
 */
export function grantScope(o: GrantScopeOptions): string {
  const supported = new Set(supportedScopes(o.services));
  const known = knownScopes(o.requested, o.services);
  const named = known.filter((s) => s !== OFFLINE_ACCESS);
  const asked = new Set(
    named.length > 0
      ? known
      : [...known, ...[...supported].filter((s) => !ADMIN_POWERS.has(s) && s !== OFFLINE_ACCESS)],
  );
  // Canonical order (identity scopes, then services as configured), so equal grants compare equal.
  const granted = [...supported]
    .filter((s) => asked.has(s))
    .filter((s) => !s.startsWith('mcp:') || o.entitled.has(s.slice(4)))
    .join(' ');
  return withinPowers(granted, o.powers);
}

/**
 * A scope without the administrative scopes outside `powers` (and `mail:send_as` without `mcp:mail`, where it
 * means nothing). Re-applied whenever a token is issued from a stored grant (code exchange, device code,
 * refresh): the admin list or the user's email may have changed since the grant was made.
 */
export function withinPowers(scope: string, powers: ReadonlySet<string>): string {
  const scopes = scope.split(' ').filter((s) => s !== '');
  const mail = scopes.includes(serviceScope('mail'));
  return scopes
    .filter((s) => !ADMIN_POWERS.has(s) || powers.has(s))
    .filter((s) => s !== SEND_AS_SCOPE || mail)
    .join(' ');
}

/** The administrative scopes in `scope` (what a consent must have named, beyond services). */
export function powersOf(scope: string): string[] {
  return scope.split(' ').filter((s) => ADMIN_POWERS.has(s));
}

/** A granted scope without the services the user is not (or no longer) entitled to. */
export function entitledScope(scope: string, entitled: ReadonlySet<string>): string {
  return scope
    .split(' ')
    .filter((s) => s !== '' && (!s.startsWith('mcp:') || entitled.has(s.slice(4))))
    .join(' ');
}
