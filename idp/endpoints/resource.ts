import type { IdpConfig } from '../config.ts';
import type { IdpContext } from '../context.ts';
import { DEVICE_CODE_GRANT, hashDeviceSecret } from '../device-codes.ts';
import { InvalidTargetError } from '../errors.ts';
import { hashCode } from '../store/codes.ts';
import { grantedResources } from '../store/granted-resources.ts';
import { hashRefreshToken } from './token-response.ts';

/** What a `resource` names: the platform as a whole, or one service (`service:<name>`). */
export const PLATFORM_TARGET = 'platform';

/**
 * RFC 8707 `resource`: must name a configured service's MCP endpoint (`{base}/<service>/mcp`), the platform
 * audience, or PUBLIC_BASE_URL's origin (the platform as a whole, as ChatGPT names it), with or without a
 * trailing `/` (clients add one to an origin-only resource, or drop it). The token's `aud` stays the one
 * platform audience either way, so a refresh without `resource` keeps it.
 */
export function validateResource(config: IdpConfig, resource: string): void {
  resourceTarget(config, resource);
}

/**
 * What the resource names: PLATFORM_TARGET (the platform audience or PUBLIC_BASE_URL's origin) or
 * `service:<name>`; InvalidTargetError when it names nothing of this platform.
 */
export function resourceTarget(config: IdpConfig, resource: string): string {
  const bare = (s: string) => s.replace(/\/$/, '');
  if (bare(resource) === bare(config.audience)) return PLATFORM_TARGET;
  if (config.publicBaseUrl && isOriginRoot(resource, new URL(config.publicBaseUrl).origin))
    return PLATFORM_TARGET;
  return `service:${resourceService(config, resource)}`;
}

/** `https://host` or `https://host/`: the origin itself, no path, query, fragment or credentials. */
function isOriginRoot(resource: string, origin: string): boolean {
  let u: URL;
  try {
    u = new URL(resource);
  } catch {
    return false;
  }
  return (
    u.origin === origin &&
    u.pathname === '/' &&
    u.search === '' &&
    u.hash === '' &&
    u.username === '' &&
    u.password === '' &&
    !/[?#]/.test(resource)
  );
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

/**
 * An authorization (or device authorization) request's `resource`, recorded with the grant its code starts
 * (before the code exists).
 */
export async function recordGrantedResource(
  ctx: IdpContext,
  familyId: string,
  resource: string | undefined,
): Promise<void> {
  if (resource === undefined) return;
  await grantedResources(ctx.pool).record(familyId, resourceTarget(ctx.config, resource));
}

/**
 * The token request's `resource` (RFC 8707 §2.2): it must name something of this platform, and, for a code, a
 * device code or a refresh token whose authorization request named a resource, the same one. Checked before the grant is
 * touched: a refused request leaves the code or refresh token usable for the right one. A code or token that is
 * unknown, another client's, or granted without a resource is left to the grant's own checks.
 */
export async function checkTokenResource(
  ctx: IdpContext,
  form: ReadonlyMap<string, string>,
  grantType: string | undefined,
  clientId: string,
): Promise<void> {
  const resource = form.get('resource');
  if (resource === undefined) return;
  const target = resourceTarget(ctx.config, resource);
  const code = form.get('code');
  const refresh = form.get('refresh_token');
  const device = form.get('device_code');
  const store = grantedResources(ctx.pool);
  const granted =
    grantType === 'authorization_code' && code && code.length <= 256
      ? await store.ofCode(hashCode(code), clientId)
      : grantType === 'refresh_token' && refresh && refresh.length <= 256
        ? await store.ofRefreshToken(hashRefreshToken(refresh), clientId)
        : grantType === DEVICE_CODE_GRANT && device && device.length <= 256
          ? await store.ofDeviceCode(hashDeviceSecret(device), clientId)
          : undefined;
  if (granted !== undefined && granted !== target)
    throw new InvalidTargetError(`resource "${resource}" is not the resource this grant was issued for`);
}
