import { InvalidScopeError } from './errors.ts';

export const IDENTITY_SCOPES = ['openid', 'profile', 'email'] as const;
/** The admin API's scope: granted only when asked for, and only to PLATFORM_ADMIN_EMAILS. */
export const ADMIN_SCOPE = 'platform:admin';

/**
 * The clients that may hold `platform:admin`: the first-party command-line client, which the user runs
 * themselves and which needs no consent. A third-party client never gets it, even for an admin who asked
 * through it: the consent page approves services, and approving a connector for mail must not hand it
 * the administration of the platform (nor may a silent `prompt=none` request add it later).
 */
export const ADMIN_CLIENTS: ReadonlySet<string> = new Set(['platform-cli']);

/** Whether a token for this user, issued to this client, may carry `platform:admin`. */
export function mayHoldAdminScope(
  config: { adminEmails: ReadonlySet<string> },
  who: { email: string; clientId: string },
): boolean {
  return ADMIN_CLIENTS.has(who.clientId) && config.adminEmails.has(who.email.trim().toLowerCase());
}

export const serviceScope = (service: string) => `mcp:${service}`;

export function supportedScopes(services: readonly string[]): string[] {
  return [...IDENTITY_SCOPES, ...services.map(serviceScope), ADMIN_SCOPE];
}

export function parseScope(value: string | undefined | null): string[] {
  if (value === undefined || value === null) return [];
  return [...new Set(value.split(' ').filter((s) => s !== ''))];
}

export interface GrantScopeOptions {
  requested: string[];
  services: readonly string[];
  entitled: ReadonlySet<string>;
  /** Whether `platform:admin` may be granted (mayHoldAdminScope: an admin, through a first-party client). */
  isAdmin: boolean;
}

/**
 * The granted scope: what was asked (every identity and service scope when nothing was), minus services the
 * user is not entitled to, minus `platform:admin` unless it was asked for by an admin. An unknown scope is an
 * error rather than silently dropped, so a typo is visible.
 */
export function grantScope(o: GrantScopeOptions): string {
  const supported = new Set(supportedScopes(o.services));
  for (const s of o.requested) {
    if (!/^[\x21\x23-\x5B\x5D-\x7E]+$/.test(s))
      throw new InvalidScopeError('scope contains a character RFC 6749 §3.3 forbids');
    if (!supported.has(s)) throw new InvalidScopeError(`scope "${s}" is not supported`);
  }
  const asked = new Set(
    o.requested.length > 0 ? o.requested : [...supported].filter((s) => s !== ADMIN_SCOPE),
  );
  // Canonical order (identity scopes, then services as configured), so equal grants compare equal.
  return [...supported]
    .filter((s) => asked.has(s))
    .filter((s) => !s.startsWith('mcp:') || o.entitled.has(s.slice(4)))
    .filter((s) => s !== ADMIN_SCOPE || o.isAdmin)
    .join(' ');
}

/**
 * Re-applied whenever a token is issued from a stored grant (code exchange, refresh): the admin list or the
 * user's email may have changed since the grant was made.
 */
export function withoutAdminUnlessAdmin(scope: string, isAdmin: boolean): string {
  if (isAdmin) return scope;
  return scope
    .split(' ')
    .filter((s) => s !== ADMIN_SCOPE)
    .join(' ');
}

/** A granted scope without the services the user is not (or no longer) entitled to. */
export function entitledScope(scope: string, entitled: ReadonlySet<string>): string {
  return scope
    .split(' ')
    .filter((s) => s !== '' && (!s.startsWith('mcp:') || entitled.has(s.slice(4))))
    .join(' ');
}
