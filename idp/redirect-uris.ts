// Redirect URI rules (RFC 8252 §7.3 and §8.3, RFC 9700 §4.1.3).
// - Loopback: `http://127.0.0.1:<port>/<path>`, `http://[::1]:<port>/<path>`, `http://localhost:<port>/<path>`,
//   any path, optional query. At authorize the port is free (a native client takes whatever port is free per
//   login); host, path and query must equal a registered loopback URI's, compared as written.
// - Everything else (https connector callbacks, private-use schemes such as `cursor://…`) is compared as an
//   exact string, and registration accepts it only when the operator listed it.
// - Userinfo and fragments never match anything.

// Matched against the URI as written, so that nothing a URL parser would normalise (dot segments, case,
// default ports, percent-encoding) can make two different strings compare equal.
const LOOPBACK = /^http:\/\/(127\.0\.0\.1|\[::1\]|localhost)(?::(\d{1,5}))?(\/[^?#\s]*)?(\?[^#\s]*)?$/;

interface Loopback {
  host: string;
  port: string | undefined;
  path: string;
  query: string;
}

function parseLoopback(uri: string): Loopback | undefined {
  const m = LOOPBACK.exec(uri);
  if (!m) return undefined;
  if (m[2] !== undefined && Number(m[2]) > 65535) return undefined;
  try {
    new URL(uri);
  } catch {
    return undefined;
  }
  return { host: m[1]!, port: m[2], path: m[3] ?? '/', query: m[4] ?? '' };
}

export function isLoopbackRedirect(uri: string): boolean {
  return parseLoopback(uri) !== undefined;
}

// Schemes that are neither a web callback nor an application's own: never a redirect target.
const NEVER = new Set([
  'http:',
  'https:',
  'javascript:',
  'data:',
  'file:',
  'blob:',
  'vbscript:',
  'about:',
  'ftp:',
  'ws:',
  'wss:',
]);

/** A private-use URI scheme redirect (RFC 8252 §7.1): `scheme:` + something, no userinfo, no fragment. */
export function isPrivateUseRedirect(uri: string): boolean {
  if (/[#\s]/.test(uri)) return false;
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return false;
  }
  return (
    !NEVER.has(u.protocol) &&
    /^[a-z][a-z0-9+.-]*:$/.test(u.protocol) &&
    u.username === '' &&
    u.password === ''
  );
}

/** An https redirect without userinfo or fragment. */
export function isHttpsRedirect(uri: string): boolean {
  if (/[#\s]/.test(uri)) return false;
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return false;
  }
  return u.protocol === 'https:' && u.username === '' && u.password === '' && uri.startsWith('https://');
}

/** Whether `given` (from an authorization request) matches one of a client's registered redirect URIs. */
export function redirectUriMatches(registered: readonly string[], given: string): boolean {
  if (given.includes('#')) return false;
  const loop = parseLoopback(given);
  if (!loop) return registered.includes(given) && !isLoopbackLike(given);
  return registered.some((r) => {
    const l = parseLoopback(r);
    return l !== undefined && l.host === loop.host && l.path === loop.path && l.query === loop.query;
  });
}

/** An http URI on a loopback host that is not a well-formed loopback redirect is never matched exactly. */
function isLoopbackLike(uri: string): boolean {
  return /^http:/i.test(uri);
}

export type ApplicationType = 'native' | 'web';

/**
 * Registration (RFC 7591 + OIDC Dynamic Registration's application_type): null when `uri` is acceptable for
 * the application type, else the reason.
 */
export function redirectUriProblem(
  uri: string,
  o: { applicationType: ApplicationType; allowed: readonly string[] },
): string | null {
  if (uri.includes('#')) return 'must not carry a fragment';
  if (o.applicationType === 'native') {
    if (isLoopbackRedirect(uri)) return null;
    if (isPrivateUseRedirect(uri)) {
      return o.allowed.includes(uri)
        ? null
        : 'is not in the list of allowed redirect URIs (PLATFORM_ALLOWED_REDIRECT_URIS)';
    }
    return 'is neither a loopback URI (http://127.0.0.1:<port>/<path>, http://[::1]:<port>/<path>, http://localhost:<port>/<path>) nor a private-use scheme; web callbacks need application_type "web"';
  }
  if (!isHttpsRedirect(uri)) return 'must be an https URI without userinfo for application_type "web"';
  return o.allowed.includes(uri)
    ? null
    : 'is not in the list of allowed redirect URIs (PLATFORM_ALLOWED_REDIRECT_URIS)';
}
