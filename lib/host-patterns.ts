// Host patterns as operators write them in the project's variables: `host` (default port only), `host:port`,
// `host:*` (any port), and `*.domain` (any subdomain of domain, not domain itself) with the same port forms.
// IPv6 literals are written in brackets, `[::1]:*`.

export interface HostPattern {
  /** Lowercased host; `*.example.com` for a subdomain wildcard; IPv6 in brackets. */
  host: string;
  /** `undefined`: any port; `''`: the scheme's default port only; else the port. */
  port: string | undefined;
  /** True when the host part is named exactly (no wildcard). */
  exact: boolean;
}

const PATTERN = /^(\[[0-9a-fA-F:.]+\]|(?:\*\.)?[A-Za-z0-9_.-]+)(?::(\*|\d{1,5}))?$/;

/** Parses one pattern; returns an error message instead of throwing so each config module names its variable. */
export function parseHostPattern(value: string): HostPattern | string {
  const m = PATTERN.exec(value.trim());
  if (!m) return `"${value}" is not a host pattern (host, host:port, host:* or *.domain)`;
  const p = m[2];
  if (p !== undefined && p !== '*' && Number(p) > 65535) return `"${value}" has a bad port`;
  const host = m[1]!.toLowerCase();
  if (host === '*.' || host.endsWith('.') || host.startsWith('.'))
    return `"${value}" is not a host pattern (host, host:port, host:* or *.domain)`;
  return { host, port: p === '*' ? undefined : (p ?? ''), exact: !host.startsWith('*.') };
}

/** The pattern that matches a URL's host and port (`URL.hostname`, `URL.port`), if any. */
export function matchHost(
  patterns: readonly HostPattern[],
  hostname: string,
  port: string,
): HostPattern | undefined {
  const name = hostname.toLowerCase();
  return patterns.find((p) => {
    if (p.port !== undefined && p.port !== port) return false;
    if (p.exact) return p.host === name;
    const suffix = p.host.slice(1); // ".example.com"
    return name.endsWith(suffix) && name.length > suffix.length;
  });
}

/**
 * Whether a `Host` header value (`name`, `name:port`, `[v6]:port`) is one the patterns allow. Without a port
 * in the header, only patterns for the default port (`host`) or any port (`host:*`) match.
 */
export function matchHostHeader(patterns: readonly HostPattern[], header: string): boolean {
  const h = header.toLowerCase();
  let name: string;
  let port: string;
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    if (end < 0) return false;
    name = h.slice(0, end + 1);
    if (end + 1 < h.length && h[end + 1] !== ':') return false;
    port = h.slice(end + 2);
  } else {
    const i = h.lastIndexOf(':');
    name = i < 0 ? h : h.slice(0, i);
    port = i < 0 ? '' : h.slice(i + 1);
  }
  if (port !== '' && !/^\d{1,5}$/.test(port)) return false;
  return matchHost(patterns, name, port) !== undefined;
}
