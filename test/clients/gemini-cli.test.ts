// Gemini CLI: DCR asking for every scope the provider's metadata lists (joined), a localhost callback,
// `resource` = the server URL on authorize, token and refresh, and `scope` again on refresh.
// Sources:
// - DCR (client_name "Gemini CLI MCP Client", http://localhost:<port>/oauth/callback, code+refresh, none,
//   scope = the metadata's scopes_supported joined), no document, no application_type:
//   https://github.com/google-gemini/gemini-cli/blob/main/packages/core/src/mcp/oauth-provider.ts
// - authorize with S256, state, resource; refresh with resource and scope:
//   https://github.com/google-gemini/gemini-cli/blob/main/packages/core/src/utils/oauth-flow.ts
// - the resource metadata's `resource` must equal the server URL (ResourceMismatchError):
//   https://github.com/google-gemini/gemini-cli/blob/main/packages/core/src/mcp/oauth-utils.ts
import { describe, expect, it } from 'vitest';
import { useReplayStack } from '../helpers/client-replay.ts';
import { operatorSettings } from '../helpers/connect-settings.ts';
import { freePort } from '../helpers/processes.ts';

// docs/connect.md's settings for Gemini CLI (none).
const r = useReplayStack(operatorSettings('gemini-cli'));

describe('Gemini CLI', () => {
  it('registers with every scope the metadata lists (oauth-provider.ts), signs in, refreshes with resource and scope, and gets no admin power', async () => {
    const { asm, prm } = await r.discover();
    expect(prm.resource).toBe(r.serverUrl());
    const scope = asm.scopes_supported.join(' ');
    const redirectUri = `http://localhost:${await freePort()}/oauth/callback`;
    const reg = await r.register({
      client_name: 'Gemini CLI MCP Client',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope,
    });
    expect(reg.status, reg.text).toBe(201);
    const clientId = reg.json.client_id as string;
    const s = await r.signIn({
      authorize: ({ challenge, state }) => ({
        client_id: clientId,
        response_type: 'code',
        redirect_uri: redirectUri,
        state,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        scope,
        resource: r.serverUrl(),
      }),
      token: ({ code, verifier }) => ({
        grant_type: 'authorization_code',
        code,
        redirect_uri: redirectUri,
        code_verifier: verifier,
        client_id: clientId,
        resource: r.serverUrl(),
      }),
      refresh: ({ refreshToken }) => ({
        grant_type: 'refresh_token',
        refresh_token: refreshToken,
        client_id: clientId,
        scope,
        resource: r.serverUrl(),
      }),
    });
    expect(s.me).toMatchObject({ email: r.user.email, client_id: clientId });
    for (const granted of [s.token.json.scope, s.refreshed.json.scope]) {
      expect(String(granted).split(' ')).toContain('mcp:platform');
      expect(String(granted).split(' ')).not.toContain('platform:admin');
    }
  });

  it('registers with an empty scope when the metadata lists none (oauth-provider.ts: `""`)', async () => {
    const reg = await r.register({
      client_name: 'Gemini CLI MCP Client',
      redirect_uris: [`http://localhost:${await freePort()}/oauth/callback`],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope: '',
    });
    expect(reg.status, reg.text).toBe(201);
  });
});
