import type { IncomingMessage } from 'node:http';
import { type HostPattern, matchHostHeader } from '../../lib/host-patterns.ts';
import { InvalidHostError, OriginNotAllowedError } from './errors.ts';

/**
 * DNS-rebinding guard of the MCP routes (spec: `<SERVICE>_MCP_ALLOWED_HOSTS` / `_ORIGINS`, applied before the
 * app is built). Patterns as lib/host-patterns.ts reads them: `host`, `host:port`, `host:*`, `*.domain`. The SDK's own option is deprecated and
 * matches exact strings only, so the guard lives here. An empty list turns a guard off: every MCP request
 * must also carry the gateway's HMAC-signed identity, which a rebinding web page cannot produce.
 */
export interface HostGuard {
  check(req: IncomingMessage): void;
}

export function createHostGuard(
  allowedHosts: readonly HostPattern[],
  allowedOrigins: readonly string[],
): HostGuard {
  return {
    check(req) {
      if (allowedHosts.length > 0) {
        const host = (req.headers.host ?? '').toLowerCase();
        if (!matchHostHeader(allowedHosts, host)) throw new InvalidHostError(host);
      }
      const origin = req.headers.origin;
      // Non-browser clients send no Origin; only a present, unlisted one is refused.
      if (allowedOrigins.length > 0 && origin !== undefined && !allowedOrigins.includes(origin)) {
        throw new OriginNotAllowedError(origin);
      }
    },
  };
}
