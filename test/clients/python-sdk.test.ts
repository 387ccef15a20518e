// The MCP Python SDK client (httpx; not on npm, so its requests are replayed): DCR with application_type
// "native", scope from the challenge, then the resource metadata, then the provider's, plus offline_access with
// prompt=consent, `resource` on authorize, token and refresh, state and RFC 9207 `iss` checked, the issuer
// compared as an exact string, and the registered method used (a secret method must come with a secret).
// Sources:
// - https://github.com/modelcontextprotocol/python-sdk/blob/main/src/mcp/client/auth/oauth2.py
// - https://github.com/modelcontextprotocol/python-sdk/blob/main/src/mcp/client/auth/utils.py
// - ≤1.22 could not parse a client_secret_basic answer: https://github.com/buildswithpaul/Frappe_Assistant_Core/issues/65
import { describe, expect, it } from 'vitest';
import { basicAuth, useReplayStack } from '../helpers/client-replay.ts';

const CALLBACK = 'http://localhost:3030/callback';

const r = useReplayStack();

async function pythonClient(method: 'none' | 'client_secret_basic') {
  const { challenge: wwwAuthenticate, prm, asm } = await r.discover();
  expect(asm.issuer).toBe(prm.authorization_servers[0]);
  const base =
    /scope="([^"]*)"/.exec(wwwAuthenticate)?.[1] ??
    prm.scopes_supported?.join(' ') ??
    asm.scopes_supported.join(' ');
  const scope = `${base} offline_access`;
  const reg = await r.register({
    redirect_uris: [CALLBACK],
    token_endpoint_auth_method: method,
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    scope,
    client_name: 'Simple Auth Client',
    application_type: 'native',
  });
  expect(reg.status, reg.text).toBe(201);
  const clientId = reg.json.client_id as string;
  const secret = reg.json.client_secret as string | undefined;
  if (method !== 'none') expect(secret).toEqual(expect.any(String));
  const auth: Record<string, string> = method === 'none' ? { client_id: clientId } : {};
  return r
    .signIn({
      headers: method === 'none' ? {} : basicAuth(clientId, secret!),
      authorize: ({ challenge, state }) => ({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: CALLBACK,
        state,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        resource: prm.resource,
        scope,
        prompt: 'consent',
      }),
      token: ({ code, verifier }) => ({
        grant_type: 'authorization_code',
        code,
        redirect_uri: CALLBACK,
        ...auth,
        code_verifier: verifier,
        resource: prm.resource,
      }),
      refresh: ({ refreshToken }) => ({
        grant_type: 'refresh_token',
        refresh_token: refreshToken,
        ...auth,
        resource: prm.resource,
      }),
    })
    .then((s) => ({ s, clientId, asm }));
}

describe('MCP Python SDK client', () => {
  it('registers native and public, signs in with offline_access and prompt=consent, checks iss, refreshes (oauth2.py)', async () => {
    const { s, clientId, asm } = await pythonClient('none');
    expect(s.authorize.consentShown).toBe(true);
    expect(s.authorize.location!.searchParams.get('iss')).toBe(asm.issuer);
    expect(s.me).toMatchObject({ email: r.user.email, client_id: clientId });
  });

  it('registers with client_secret_basic, gets a secret and authenticates with it (utils.py, frappe#65)', async () => {
    const { s, clientId } = await pythonClient('client_secret_basic');
    expect(s.me).toMatchObject({ email: r.user.email, client_id: clientId });
  });
});
