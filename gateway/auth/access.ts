import type { GatewayConfig, ServiceConfig } from '../config.ts';
import { InsufficientScopeError, InvalidTokenError } from '../errors.ts';
import type { VerifiedToken } from './verified-token.ts';

/** Entra delegated permission every connector token must carry (resource-server-contract.md, registration #4). */
export const ENTRA_SCOPE = 'mcp.access';

/**
 * The per-service half of validation, run on every request (a cached token was verified for whichever service
 * saw it first): is this token's trust path open for the service, and is the service in its audience?
 */
export function checkAudience(config: GatewayConfig, service: ServiceConfig, t: VerifiedToken): void {
  // Written out per trust path rather than through a list of accepted values: this runs on every request.
  let first: string;
  let second: string | undefined;
  switch (t.kind) {
    case 'platform':
      if (!config.platform)
        throw new InvalidTokenError('unknown_issuer', 'the platform issuer is not trusted');
      first = config.platform.audience;
      break;
    case 'entra':
      if (service.entraClientId === undefined) {
        throw new InvalidTokenError('unknown_issuer', 'Entra ID tokens are not accepted by this service');
      }
      // resource-server-contract.md § Bearer validation 2: either the client id or the app id URI.
      first = service.entraClientId;
      second = service.appIdUri;
      break;
    case 'service':
      if (service.sharedSecret === undefined || t.iss !== service.name) {
        throw new InvalidTokenError('unknown_issuer', 'token issuer is not trusted by this service');
      }
      first = service.appIdUri;
      break;
  }
  for (const a of t.aud) {
    if (a === first || a === second) return;
    // Entra GUIDs are case-insensitive; the configured client id is stored lowercased.
    if (t.kind === 'entra' && a.toLowerCase() === first) return;
  }
  // The spec's wording ("Audience doesn't match") is what connector diagnostics look for.
  const expected = second === undefined ? first : `${first}, ${second}`;
  throw new InvalidTokenError('invalid_audience', `Audience doesn't match (expected one of: ${expected})`);
}

/** Platform tokens need `mcp:<service>`; Entra tokens `mcp.access` in `scp`; service tokens are the service's own. */
export function checkScope(service: ServiceConfig, t: VerifiedToken): void {
  if (t.kind === 'platform' && !t.scopes.includes(service.platformScope)) {
    throw new InsufficientScopeError(service.platformScope);
  }
  if (t.kind === 'entra' && !t.scopes.includes(ENTRA_SCOPE)) {
    throw new InsufficientScopeError(`${service.appIdUri}/${ENTRA_SCOPE}`);
  }
}
