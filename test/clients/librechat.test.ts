// LibreChat (a server-side web app): DCR asking for the first secret-based authentication method the provider
// lists (`none` only when it is the sole one), response_types = the provider's, refresh only when listed, its
// server callback, and the method the registration answer names at the token endpoint.
// Source: https://github.com/danny-avila/LibreChat/blob/main/packages/api/src/mcp/oauth/handler.ts
// (DOMAIN_SERVER is LibreChat's public origin, http://localhost:3080 by default.)
import { describe, expect, it } from 'vitest';
import { basicAuth, useReplayStack } from '../helpers/client-replay.ts';

const CALLBACK = 'http://localhost:3080/api/mcp/platform/oauth/callback';

const r = useReplayStack();

describe('LibreChat', () => {
  it('registers with the first secret-based method listed and authenticates with it (handler.ts)', async () => {
    const { asm, prm } = await r.discover();
    const methods = asm.token_endpoint_auth_methods_supported as string[];
    const method = methods.find((m) => m === 'client_secret_basic' || m === 'client_secret_post') ?? 'none';
    expect(method).not.toBe('none');
    const grants = ['authorization_code'];
    if ((asm.grant_types_supported as string[]).includes('refresh_token')) grants.push('refresh_token');
    const reg = await r.register({
      client_name: 'LibreChat MCP Client',
      redirect_uris: [CALLBACK],
      grant_types: grants,
      response_types: asm.response_types_supported,
      token_endpoint_auth_method: method,
      scope: prm.scopes_supported.join(' '),
    });
    expect(reg.status, reg.text).toBe(201);
    const clientId = reg.json.client_id as string;
    const secret = reg.json.client_secret as string;
    expect(secret).toEqual(expect.any(String));
    const used = reg.json.token_endpoint_auth_method as string;
    const auth: Record<string, string> =
      used === 'client_secret_basic' ? {} : { client_id: clientId, client_secret: secret };
    const s = await r.signIn({
      headers: used === 'client_secret_basic' ? basicAuth(clientId, secret) : {},
      authorize: ({ challenge, state }) => ({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: CALLBACK,
        scope: prm.scopes_supported.join(' '),
        state,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        resource: prm.resource,
      }),
      token: ({ code, verifier }) => ({
        grant_type: 'authorization_code',
        code,
        redirect_uri: CALLBACK,
        code_verifier: verifier,
        resource: prm.resource,
        ...auth,
      }),
      refresh: ({ refreshToken }) => ({
        grant_type: 'refresh_token',
        refresh_token: refreshToken,
        resource: prm.resource,
        ...auth,
      }),
    });
    expect(s.me).toMatchObject({ email: r.user.email, client_id: clientId });
  });
});
