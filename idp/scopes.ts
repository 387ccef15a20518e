import { InvalidScopeError } from './errors.ts';

export const IDENTITY_SCOPES = ['openid', 'profile', 'email'] as const;

export const serviceScope = (service: string) => `mcp:${service}`;

export function supportedScopes(services: readonly string[]): string[] {
  return [...IDENTITY_SCOPES, ...services.map(serviceScope)];
}

export function parseScope(value: string | undefined | null): string[] {
  if (value === undefined || value === null) return [];
  return [...new Set(value.split(' ').filter((s) => s !== ''))];
}

/**
 * The granted scope: what was asked (everything supported when nothing was), minus services the user is
 * not entitled to. An unknown scope is an error rather than silently dropped, so a typo is visible.
 */
export function grantScope(
  requested: string[],
  services: readonly string[],
  entitled: ReadonlySet<string>,
): string {
  const supported = new Set(supportedScopes(services));
  for (const s of requested) {
    if (!/^[\x21\x23-\x5B\x5D-\x7E]+$/.test(s))
      throw new InvalidScopeError('scope contains a character RFC 6749 §3.3 forbids');
    if (!supported.has(s)) throw new InvalidScopeError(`scope "${s}" is not supported`);
  }
  const asked = new Set(requested.length > 0 ? requested : supported);
  // Canonical order (identity scopes, then services as configured), so equal grants compare equal.
  return [...supported]
    .filter((s) => asked.has(s) && (!s.startsWith('mcp:') || entitled.has(s.slice(4))))
    .join(' ');
}

/** A granted scope without the services the user is not (or no longer) entitled to. */
export function entitledScope(scope: string, entitled: ReadonlySet<string>): string {
  return scope
    .split(' ')
    .filter((s) => s !== '' && (!s.startsWith('mcp:') || entitled.has(s.slice(4))))
    .join(' ');
}
