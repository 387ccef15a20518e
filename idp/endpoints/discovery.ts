import { sendJson } from '../../lib/http.ts';
import { ASSERTION_ALGS, AUTH_METHODS } from '../client-auth/index.ts';
import type { IdpConfig } from '../config.ts';
import type { Endpoint } from '../context.ts';
import { IDP_DPOP_ALGORITHMS } from '../dpop/index.ts';
import { ID_JAG_PROFILE } from '../id-jag/index.ts';
import { supportedScopes } from '../scopes.ts';
import { supportedGrantTypes } from './token.ts';

/** RFC 8414 / OpenID Connect Discovery metadata; the same document at both well-known paths. */
export function buildMetadata(config: IdpConfig): Record<string, unknown> {
  const i = config.issuer;
  return {
    issuer: i,
    authorization_endpoint: `${i}/oauth/authorize`,
    token_endpoint: `${i}/oauth/token`,
    jwks_uri: `${i}/.well-known/jwks.json`,
    registration_endpoint: `${i}/oauth/register`,
    revocation_endpoint: `${i}/oauth/revoke`,
    userinfo_endpoint: `${i}/oauth/userinfo`,
    scopes_supported: supportedScopes(config.services),
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    device_authorization_endpoint: `${i}/oauth/device_authorization`,
    // The token endpoint's table of grants (assertion grants when trusted issuers are configured).
    grant_types_supported: supportedGrantTypes(config),
    // MCP enterprise-managed authorization: ID-JAGs from the trusted `id-jag` issuers (the file is read on SIGHUP,
    // so the profile is listed whenever the file is configured).
    ...(config.trustedIssuersFile === undefined
      ? {}
      : { authorization_grant_profiles_supported: [ID_JAG_PROFILE] }),
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256'],
    token_endpoint_auth_methods_supported: [...AUTH_METHODS],
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGS,
    revocation_endpoint_auth_methods_supported: [...AUTH_METHODS],
    revocation_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGS,
    code_challenge_methods_supported: ['S256'],
    dpop_signing_alg_values_supported: [...IDP_DPOP_ALGORITHMS],
    claims_supported: [
      'iss',
      'sub',
      'aud',
      'exp',
      'iat',
      'auth_time',
      'nonce',
      'azp',
      'email',
      'email_verified',
    ],
    authorization_response_iss_parameter_supported: true,
    client_id_metadata_document_supported: true,
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
    claims_parameter_supported: false,
  };
}

export function discovery(config: IdpConfig): Endpoint {
  const body = buildMetadata(config);
  return async (_ctx, { res }) => {
    sendJson(res, 200, body, { 'cache-control': 'public, max-age=300' });
  };
}
