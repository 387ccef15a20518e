import type { IdpConfig } from './config.ts';
import type { Endpoint } from './context.ts';
import { authorize } from './endpoints/authorize.ts';
import { consentDecision } from './endpoints/consent.ts';
import { deviceAuthorization } from './endpoints/device-authorization.ts';
import { deviceDecision, deviceVerification } from './endpoints/device-verification.ts';
import { discovery } from './endpoints/discovery.ts';
import { jwks } from './endpoints/jwks.ts';
import { register } from './endpoints/register.ts';
import { revoke } from './endpoints/revoke.ts';
import { token } from './endpoints/token.ts';
import { userinfo } from './endpoints/userinfo.ts';
import type { SigningKey } from './tokens/keys.ts';

export type RouteTable = ReadonlyMap<string, Readonly<Record<string, Endpoint>>>;

const health: Endpoint = async (_ctx, { res }) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': 15 });
  res.end('{"status":"ok"}');
};

/** The provider's whole surface, in one place: path → method → endpoint. */
export function routes(config: IdpConfig, keys: readonly SigningKey[]): RouteTable {
  const meta = discovery(config);
  return new Map<string, Record<string, Endpoint>>([
    ['/.well-known/openid-configuration', { GET: meta }],
    ['/.well-known/oauth-authorization-server', { GET: meta }],
    ['/.well-known/jwks.json', { GET: jwks(keys) }],
    ['/oauth/authorize', { GET: authorize, POST: consentDecision }],
    ['/oauth/token', { POST: token }],
    ['/oauth/register', { POST: register }],
    ['/oauth/revoke', { POST: revoke }],
    ['/oauth/userinfo', { GET: userinfo, POST: userinfo }],
    ['/oauth/device_authorization', { POST: deviceAuthorization }],
    ['/oauth/device', { GET: deviceVerification, POST: deviceDecision }],
    ['/health', { GET: health }],
  ]);
}
