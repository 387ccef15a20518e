import { ENTRA_SCOPE } from './auth/access.ts';
import type { GatewayConfig, ServiceConfig } from './config.ts';

/**
 * RFC 9728 protected-resource metadata of one service (docs/gateway.md): the platform issuer first when
 * trusted, then the Entra v2 issuer when the service accepts Entra tokens; the scopes each issues for it.
 */
export function protectedResourceMetadata(config: GatewayConfig, service: ServiceConfig): string {
  const authorizationServers: string[] = [];
  const scopes: string[] = [service.platformScope];
  if (config.platform) authorizationServers.push(config.platform.issuer);
  if (config.entra && service.entraClientId !== undefined) {
    authorizationServers.push(config.entra.v2Issuer);
    scopes.push(`${service.appIdUri}/${ENTRA_SCOPE}`);
  }
  return JSON.stringify({
    resource: service.appIdUri,
    authorization_servers: authorizationServers,
    scopes_supported: scopes,
    bearer_methods_supported: ['header'],
  });
}
