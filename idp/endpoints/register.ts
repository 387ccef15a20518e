import { randomUUID } from 'node:crypto';
import { readJson, sendJson } from '../../lib/http.ts';
import { checkKeySet, isAuthMethod, newClientSecret, SECRET_METHODS } from '../client-auth/index.ts';
import type { Endpoint } from '../context.ts';
import { DEVICE_CODE_GRANT } from '../device-codes.ts';
import { InvalidClientMetadataError, InvalidRedirectUriError } from '../errors.ts';
import { JWT_BEARER_GRANT } from '../machine-clients/workload.ts';
import { inferApplicationType, redirectUriProblem } from '../redirect-uris.ts';

const MAX_REDIRECT_URIS = 10;
// jwt-bearer: a client that redeems ID-JAGs (enterprise-managed authorization) declares it, as the SDK's does.
const GRANTS: ReadonlySet<unknown> = new Set([
  'authorization_code',
  'refresh_token',
  DEVICE_CODE_GRANT,
  JWT_BEARER_GRANT,
]);

/**
 * POST /oauth/register (RFC 7591). `token_endpoint_auth_method`: `none` (default), `client_secret_post` or
 * `client_secret_basic` (a `client_secret` is returned once and stored hashed), `private_key_jwt` (with `jwks`
 * or `jwks_uri`, RFC 7523). Redirect URIs: loopback, or listed in PLATFORM_ALLOWED_REDIRECT_URIS, whatever the
 * `application_type` says (inferred when absent: https → web, else native). PKCE stays mandatory for every
 * client. Unknown metadata is ignored (§2); the answer carries no null member.
 */
export const register: Endpoint = async (ctx, x) => {
  const body = await readJson(x.req, 16 * 1024);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidClientMetadataError('the body must be a JSON object');
  }
  const m = body as Record<string, unknown>;
  const uris = m.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0)
    throw new InvalidRedirectUriError('redirect_uris must be a non-empty array');
  if (uris.length > MAX_REDIRECT_URIS)
    throw new InvalidRedirectUriError(`at most ${MAX_REDIRECT_URIS} redirect_uris`);
  for (const u of uris) {
    if (typeof u !== 'string') throw new InvalidRedirectUriError('every redirect_uri must be a string');
    const problem = redirectUriProblem(u, { allowed: ctx.config.allowedRedirectUris });
    if (problem) throw new InvalidRedirectUriError(`redirect_uri "${u.slice(0, 200)}" ${problem}`);
  }
  const redirectUris = [...new Set(uris as string[])];
  const applicationType = m.application_type ?? inferApplicationType(redirectUris);
  if (applicationType !== 'native' && applicationType !== 'web') {
    throw new InvalidClientMetadataError('application_type must be "native" or "web"');
  }
  const authMethod = m.token_endpoint_auth_method ?? 'none';
  if (!isAuthMethod(authMethod)) {
    throw new InvalidClientMetadataError(
      'token_endpoint_auth_method must be none, client_secret_post, client_secret_basic or private_key_jwt',
    );
  }
  const keys = authMethod === 'private_key_jwt' ? keySetOf(m) : {};
  if (authMethod !== 'private_key_jwt' && (m.jwks !== undefined || m.jwks_uri !== undefined))
    throw new InvalidClientMetadataError(
      'jwks and jwks_uri are for token_endpoint_auth_method private_key_jwt',
    );
  const grantTypes = m.grant_types ?? ['authorization_code', 'refresh_token'];
  if (!Array.isArray(grantTypes) || grantTypes.length === 0 || !grantTypes.every((g) => GRANTS.has(g))) {
    throw new InvalidClientMetadataError(
      `grant_types may contain only authorization_code, refresh_token, ${DEVICE_CODE_GRANT} and ${JWT_BEARER_GRANT}`,
    );
  }
  const responseTypes = m.response_types ?? ['code'];
  if (!Array.isArray(responseTypes) || !responseTypes.every((r) => r === 'code')) {
    throw new InvalidClientMetadataError('response_types may contain only code');
  }
  const name = m.client_name;
  if (name !== undefined && (typeof name !== 'string' || name.length > 200)) {
    throw new InvalidClientMetadataError('client_name must be a string of at most 200 characters');
  }
  const dpopBound = m.dpop_bound_access_tokens ?? false;
  if (typeof dpopBound !== 'boolean')
    throw new InvalidClientMetadataError('dpop_bound_access_tokens must be true or false');
  const clientId = randomUUID();
  const clientName = (name as string | undefined) ?? '';
  const secret = SECRET_METHODS.has(authMethod) ? newClientSecret() : undefined;
  await ctx.clients.create({
    clientId,
    name: clientName,
    redirectUris,
    type: authMethod === 'none' ? 'public' : 'confidential',
    authMethod,
    secretHash: secret?.hash,
    metadata: {
      grant_types: grantTypes,
      response_types: responseTypes,
      application_type: applicationType,
      token_endpoint_auth_method: authMethod,
      dpop_bound_access_tokens: dpopBound,
      ...keys,
    },
  });
  x.log.info({ clientId, redirectUris, authMethod, applicationType }, 'client registered');
  // Members without a value are left out (JSON.stringify drops undefined): some clients refuse null ones.
  sendJson(
    x.res,
    201,
    {
      client_id: clientId,
      client_id_issued_at: Math.floor(Date.now() / 1000),
      client_secret: secret?.secret,
      client_secret_expires_at: secret ? 0 : undefined,
      client_name: clientName || undefined,
      redirect_uris: redirectUris,
      token_endpoint_auth_method: authMethod,
      application_type: applicationType,
      grant_types: grantTypes,
      response_types: responseTypes,
      dpop_bound_access_tokens: dpopBound,
      ...keys,
    },
    { 'cache-control': 'no-store' },
  );
};

/** private_key_jwt: exactly one of `jwks` (checked now) and `jwks_uri` (https; fetched when used). */
function keySetOf(m: Record<string, unknown>): { jwks?: unknown; jwks_uri?: string } {
  if ((m.jwks === undefined) === (m.jwks_uri === undefined))
    throw new InvalidClientMetadataError('private_key_jwt needs exactly one of jwks and jwks_uri');
  if (m.jwks !== undefined) {
    try {
      checkKeySet(m.jwks);
    } catch (err) {
      throw new InvalidClientMetadataError(`jwks ${(err as Error).message}`);
    }
    return { jwks: m.jwks };
  }
  const uri = m.jwks_uri;
  let u: URL | undefined;
  try {
    u = typeof uri === 'string' && uri.length <= 2048 ? new URL(uri) : undefined;
  } catch {
    u = undefined;
  }
  if (u?.protocol !== 'https:' || u.username || u.password || u.hash)
    throw new InvalidClientMetadataError('jwks_uri must be an https URL without userinfo or fragment');
  return { jwks_uri: uri as string };
}
