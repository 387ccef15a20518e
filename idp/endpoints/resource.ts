import type { IdpConfig } from '../config.ts';
import { InvalidTargetError } from '../errors.ts';

/**
 * RFC 8707 `resource`: must name a configured service's MCP endpoint (`{base}/<service>/mcp`) or the platform
 * audience, with or without a trailing `/` (clients add one to an origin-only resource, or drop it). The
 * token's `aud` stays the one platform audience either way, so a refresh without `resource` keeps it.
 */
export function validateResource(config: IdpConfig, resource: string): void {
  const bare = (s: string) => s.replace(/\/$/, '');
  if (bare(resource) === bare(config.audience)) return;
  resourceService(config, resource);
}

/**
 * The service whose MCP endpoint (`{base}/<service>/mcp`, with or without a trailing `/`) a resource names;
 * InvalidTargetError when it names none (the platform audience included: it names no one service).
 */
export function resourceService(config: IdpConfig, resource: string): string {
  let u: URL;
  try {
    u = new URL(resource);
  } catch {
    throw new InvalidTargetError('resource must be an absolute URI');
  }
  if (config.publicBaseUrl && u.origin !== new URL(config.publicBaseUrl).origin) {
    throw new InvalidTargetError(`resource "${resource}" is not on ${config.publicBaseUrl}`);
  }
  if (u.hash) throw new InvalidTargetError('resource must not carry a fragment');
  const m = /^\/([a-z][a-z0-9-]*)\/mcp\/?$/.exec(u.pathname);
  if (!m || !config.services.includes(m[1]!) || u.search) {
    throw new InvalidTargetError(`resource "${resource}" is not a service of this platform`);
  }
  return m[1]!;
}
