// Redirect URI rules (spec § POST /oauth/register, RFC 8252 §7.3, RFC 9700 §4.1.3): exact string match,
// except that a loopback URI matches on any port, since a command-line client picks a free port per login.

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** `http://127.0.0.1:<port>/callback` (or localhost / [::1]), nothing else: no query, fragment or userinfo. */
export function isLoopbackCallback(uri: string): boolean {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return false;
  }
  return (
    u.protocol === 'http:' &&
    LOOPBACK_HOSTS.has(u.hostname) &&
    u.pathname === '/callback' &&
    u.search === '' &&
    u.hash === '' &&
    u.username === '' &&
    u.password === '' &&
    !uri.includes('#') &&
    !uri.includes('?')
  );
}

function withoutPort(uri: string): string {
  const u = new URL(uri);
  u.port = '';
  return u.toString();
}

export function redirectUriMatches(registered: readonly string[], given: string): boolean {
  if (registered.includes(given)) return true;
  if (!isLoopbackCallback(given)) return false;
  const g = withoutPort(given);
  return registered.some((r) => isLoopbackCallback(r) && withoutPort(r) === g);
}
