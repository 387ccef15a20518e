import { readForm, sendJson } from '../../lib/http.ts';
import { countedFetches } from '../cimd/index.ts';
import { authenticateClient } from '../client-auth/index.ts';
import type { Endpoint } from '../context.ts';
import { hashDeviceSecret, newDeviceCode, newUserCode, normalizeUserCode } from '../device-codes.ts';
import { InvalidRequestError, TemporarilyUnavailableError, UnauthorizedClientError } from '../errors.ts';
import { MACHINE_CLIENT_TYPE } from '../machine-clients/index.ts';
import { knownScopes, parseScope } from '../scopes.ts';
import { DEVICE_CODE_TTL_SECONDS, DEVICE_POLL_INTERVAL_SECONDS } from '../store/device-codes.ts';
import { GATEWAY_CLIENT_TYPE } from '../token-exchange/gateway-client.ts';
import { recordGrantedResource, validateResource } from './resource.ts';

export { DEVICE_CODE_GRANT } from '../device-codes.ts';

/**
 * POST /oauth/device_authorization (RFC 8628 §3.1): a client (authenticated as registered) asks for a device code and a user code.
 * Unknown scopes are dropped and the rest stored as asked; the verification page
 * narrows it to the user's entitlements and leaves out every administrative scope (adminPowers: none through
 * the device flow), naming what was left out.
 */
export const deviceAuthorization: Endpoint = async (ctx, x) => {
  const form = await readForm(x.req);
  const clientId = form.get('client_id');
  // A metadata-document client's document is read (a counted fetch) before it is authenticated.
  if (clientId) await ctx.clients.find(clientId, countedFetches(ctx.rateLimiter, x.req));
  const client = await authenticateClient(ctx, x, form);
  if (!client) throw new InvalidRequestError('client_id is required (or client authentication)');
  if (client.type === MACHINE_CLIENT_TYPE)
    throw new UnauthorizedClientError(
      'a machine client gets tokens with client_credentials only, never through the device authorization grant',
    );
  // No user is ever asked to approve the gateway's client: it only exchanges tokens users already have.
  if (client.type === GATEWAY_CLIENT_TYPE)
    throw new UnauthorizedClientError('the gateway’s client uses the token exchange only');
  const resource = form.get('resource');
  if (resource !== undefined) validateResource(ctx.config, resource);
  // Unknown scopes are dropped; the verification page decides what is granted.
  const requested = knownScopes(parseScope(form.get('scope')), ctx.config.services);
  const deviceCode = newDeviceCode();
  // The resource is bound to the grant as an authorization request's is (endpoints/resource.ts).
  const familyId = crypto.randomUUID();
  await recordGrantedResource(ctx, familyId, resource);
  // A user-code collision with a stored one is rare (20^8 codes); draw again rather than fail.
  for (let attempt = 0; attempt < 5; attempt++) {
    const userCode = newUserCode();
    const created = await ctx.deviceCodes.create(
      hashDeviceSecret(deviceCode),
      hashDeviceSecret(normalizeUserCode(userCode)!),
      { clientId: client.clientId, scope: requested.join(' '), familyId },
    );
    if (!created) continue;
    const verificationUri = `${ctx.config.issuer}/oauth/device`;
    x.log.info({ clientId: client.clientId }, 'device authorization started');
    return sendJson(
      x.res,
      200,
      {
        device_code: deviceCode,
        user_code: userCode,
        verification_uri: verificationUri,
        verification_uri_complete: `${verificationUri}?user_code=${userCode}`,
        expires_in: DEVICE_CODE_TTL_SECONDS,
        interval: DEVICE_POLL_INTERVAL_SECONDS,
      },
      { 'cache-control': 'no-store', pragma: 'no-cache' },
    );
  }
  throw new TemporarilyUnavailableError('could not allocate a user code; retry');
};
