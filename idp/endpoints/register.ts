import { randomUUID } from 'node:crypto';
import { readJson, sendJson } from '../../lib/http.ts';
import type { Endpoint } from '../context.ts';
import { DEVICE_CODE_GRANT } from '../device-codes.ts';
import { InvalidClientMetadataError, InvalidRedirectUriError } from '../errors.ts';
import { type ApplicationType, redirectUriProblem } from '../redirect-uris.ts';

const MAX_REDIRECT_URIS = 10;

/**
 * POST /oauth/register (RFC 7591). Public clients only. `application_type` (OIDC Dynamic Registration) is
 * `native` by default: loopback URIs with any path, or an allowlisted private-use scheme URI; `web`: only
 * allowlisted https URIs. Unknown metadata is ignored, as §2 allows.
 */
export const register: Endpoint = async (ctx, x) => {
  const body = await readJson(x.req, 16 * 1024);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidClientMetadataError('the body must be a JSON object');
  }
  const m = body as Record<string, unknown>;
  const applicationType = m.application_type ?? 'native';
  if (applicationType !== 'native' && applicationType !== 'web') {
    throw new InvalidClientMetadataError('application_type must be "native" or "web"');
  }
  const uris = m.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0)
    throw new InvalidRedirectUriError('redirect_uris must be a non-empty array');
  if (uris.length > MAX_REDIRECT_URIS)
    throw new InvalidRedirectUriError(`at most ${MAX_REDIRECT_URIS} redirect_uris`);
  for (const u of uris) {
    if (typeof u !== 'string') throw new InvalidRedirectUriError('every redirect_uri must be a string');
    const problem = redirectUriProblem(u, {
      applicationType: applicationType as ApplicationType,
      allowed: ctx.config.allowedRedirectUris,
    });
    if (problem) throw new InvalidRedirectUriError(`redirect_uri "${u.slice(0, 200)}" ${problem}`);
  }
  const authMethod = m.token_endpoint_auth_method ?? 'none';
  if (authMethod !== 'none') {
    throw new InvalidClientMetadataError(
      'only public clients are supported (token_endpoint_auth_method "none")',
    );
  }
  const grantTypes = m.grant_types ?? ['authorization_code', 'refresh_token'];
  if (
    !Array.isArray(grantTypes) ||
    !grantTypes.every((g) => g === 'authorization_code' || g === 'refresh_token' || g === DEVICE_CODE_GRANT)
  ) {
    throw new InvalidClientMetadataError(
      `grant_types may contain only authorization_code, refresh_token and ${DEVICE_CODE_GRANT}`,
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
  const clientId = randomUUID();
  const redirectUris = [...new Set(uris as string[])];
  const clientName = (name as string | undefined) ?? '';
  await ctx.clients.create({
    clientId,
    name: clientName,
    redirectUris,
    type: 'public',
    metadata: { grant_types: grantTypes, response_types: responseTypes, application_type: applicationType },
  });
  x.log.info({ clientId, redirectUris }, 'client registered');
  sendJson(
    x.res,
    201,
    {
      client_id: clientId,
      client_id_issued_at: Math.floor(Date.now() / 1000),
      client_name: clientName || undefined,
      redirect_uris: redirectUris,
      token_endpoint_auth_method: 'none',
      application_type: applicationType,
      grant_types: grantTypes,
      response_types: responseTypes,
    },
    { 'cache-control': 'no-store' },
  );
};
