import { hashClientSecret } from '../client-auth/index.ts';
import type { Client } from '../store/clients.ts';

// The gateway's own client (docs/idp.md § Token exchange): it exists only while PLATFORM_GATEWAY_CLIENT_SECRET is
// set, is never stored, authenticates with that secret (client_secret_basic; the gateway holds the same value as
// GATEWAY_CLIENT_SECRET) and may use one grant, the token exchange for a user's connection. No redirect URI, so
// no authorization request can name it.

export const GATEWAY_CLIENT_ID = 'platform-gateway';
export const GATEWAY_CLIENT_TYPE = 'gateway';

export function gatewayClient(secret: string): Client {
  return {
    clientId: GATEWAY_CLIENT_ID,
    name: 'platform gateway',
    redirectUris: [],
    type: GATEWAY_CLIENT_TYPE,
    authMethod: 'client_secret_basic',
    secretHash: hashClientSecret(secret),
  };
}
