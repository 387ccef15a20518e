// GitHub Copilot CLI: dynamic registration without `scope` and with a port-only loopback redirect
// (`http://127.0.0.1:<port>/`, the root path), then the authorization code flow with PKCE from that port, the
// metadata's resource and scopes, a refresh, and a tool call through the gateway.
// Sources:
// - Copilot CLI 1.0.81 registers with no scope and redirect_uris ["http://127.0.0.1:<port>/"]:
//   https://github.com/boardoil/boardoil/issues/11
// The authorization, token and refresh requests are written as the MCP TypeScript SDK's client sends them
// (resource = the protected resource's, scope = its scopes_supported when the challenge names none): no capture of
// those requests was found, only of the registration.
import { describe, expect, it } from 'vitest';
import { type ClientFlow, useReplayStack } from '../helpers/client-replay.ts';
import { freePort } from '../helpers/processes.ts';

const r = useReplayStack();

async function copilot(clientId: string, redirectUri: string): Promise<ClientFlow> {
  const { prm } = await r.discover();
  return {
    authorize: ({ challenge, state }) => [
      ['response_type', 'code'],
      ['client_id', clientId],
      ['code_challenge', challenge],
      ['code_challenge_method', 'S256'],
      ['redirect_uri', redirectUri],
      ['state', state],
      ['scope', prm.scopes_supported.join(' ')],
      ['resource', prm.resource],
    ],
    token: ({ code, verifier }) => [
      ['grant_type', 'authorization_code'],
      ['code', code],
      ['code_verifier', verifier],
      ['redirect_uri', redirectUri],
      ['resource', prm.resource],
      ['client_id', clientId],
    ],
    refresh: ({ refreshToken }) => [
      ['grant_type', 'refresh_token'],
      ['refresh_token', refreshToken],
      ['resource', prm.resource],
      ['client_id', clientId],
    ],
  };
}

describe('GitHub Copilot CLI', () => {
  it('registers without scope with http://127.0.0.1:<port>/ (boardoil#11), signs in from that port and calls whoami', async () => {
    const redirectUri = `http://127.0.0.1:${await freePort()}/`;
    const reg = await r.register({
      client_name: 'GitHub Copilot CLI',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    expect(reg.status, reg.text).toBe(201);
    expect(reg.json.redirect_uris).toEqual([redirectUri]);
    for (const [k, v] of Object.entries(reg.json)) expect(v, k).not.toBeNull();
    const s = await r.signIn(await copilot(reg.json.client_id as string, redirectUri));
    expect(`${s.authorize.location!.origin}${s.authorize.location!.pathname}`).toBe(
      redirectUri.slice(0, -1) + '/',
    );
    expect(s.token.status, s.token.text).toBe(200);
    expect(s.refreshed.status, s.refreshed.text).toBe(200);
    expect(s.me).toMatchObject({ email: r.user.email, client_id: reg.json.client_id });
  });
});
