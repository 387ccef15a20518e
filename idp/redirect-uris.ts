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

/** OIDC Dynamic Registration's application_type when the client gave none: `web` if any URI is https. */
export function inferApplicationType(uris: readonly string[]): ApplicationType {
  return uris.some((u) => u.startsWith('https://')) ? 'web' : 'native';
}

/**
 * Registration (RFC 7591): null when `uri` may be registered, else the reason. A loopback URI always may; any
 * other (https callback, private-use scheme) only when the operator listed it exactly and it is well formed.
 * `application_type` plays no part: real clients send `native` with https callbacks (VS Code) and `web` with
 * private-use schemes and loopback URIs (Cursor), and a URI the operator allowed is what matters.
 */
export function redirectUriProblem(uri: string, o: { allowed: readonly string[] }): string | null {
  if (uri.includes('#')) return 'must not carry a fragment';
  if (isLoopbackRedirect(uri)) return null;
  if (!isHttpsRedirect(uri) && !isPrivateUseRedirect(uri))
    return 'is neither a loopback URI (http://127.0.0.1:<port>/<path>, http://[::1]:<port>/<path>, http://localhost:<port>/<path>), an https URI without userinfo, nor a private-use scheme';
  return o.allowed.includes(uri)
    ? null
    : 'is not in the list of allowed redirect URIs (PLATFORM_ALLOWED_REDIRECT_URIS)';
}
