import type { IncomingMessage } from 'node:http';
import { InvalidHostError, OriginNotAllowedError } from './errors.ts';

/**
 * DNS-rebinding guard of the MCP routes (spec: `<SERVICE>_MCP_ALLOWED_HOSTS` / `_ORIGINS`, applied before the
 * app is built). Patterns: `host:port` exactly, `host:*` for any port. The SDK's own option is deprecated and
 * matches exact strings only, so the guard lives here. An empty list turns a guard off: every MCP request
 * must also carry the gateway's HMAC-signed identity, which a rebinding web page cannot produce.
 */
export interface HostGuard {
  check(req: IncomingMessage): void;
}

function hostMatches(host: string, pattern: string): boolean {
  if (pattern.endsWith(':*')) {
    const name = pattern.slice(0, -2);
    return host === name || (host.startsWith(`${name}:`) && /^\d{1,5}$/.test(host.slice(name.length + 1)));
  }
  return host === pattern;
}

export function createHostGuard(
  allowedHosts: readonly string[],
  allowedOrigins: readonly string[],
): HostGuard {
  return {
    check(req) {
      if (allowedHosts.length > 0) {
        const host = (req.headers.host ?? '').toLowerCase();
        if (!allowedHosts.some((p) => hostMatches(host, p))) throw new InvalidHostError(host);
      }
      const origin = req.headers.origin;
      // Non-browser clients send no Origin; only a present, unlisted one is refused.
      if (allowedOrigins.length > 0 && origin !== undefined && !allowedOrigins.includes(origin)) {
        throw new OriginNotAllowedError(origin);
      }
    },
  };
}
