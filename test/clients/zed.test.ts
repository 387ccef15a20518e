// Zed: DCR with grant_types ["authorization_code"] only and 127.0.0.1:27523 (or an ephemeral port), re-registering
// on every flow; it aborts unless the metadata lists S256 and the resource metadata names authorization servers;
// scope from the challenge, then the resource metadata, never offline_access; `resource` on authorize, token and
// refresh; no client secret.
// Source: https://github.com/zed-industries/zed/blob/main/crates/context_server/src/oauth.rs
import { describe, expect, it } from 'vitest';
import { useReplayStack } from '../helpers/client-replay.ts';

const r = useReplayStack();

describe('Zed', () => {
  it('finds S256 and authorization servers, without which Zed aborts (oauth.rs)', async () => {
    const { asm, prm } = await r.discover();
    expect(asm.code_challenge_methods_supported).toContain('S256');
    expect(prm.authorization_servers.length).toBeGreaterThan(0);
  });

  it('registers with grant_types ["authorization_code"] only, signs in without offline_access and still refreshes (oauth.rs)', async () => {
    const { challenge: wwwAuthenticate, prm } = await r.discover();
    const scope = /scope="([^"]*)"/.exec(wwwAuthenticate)?.[1] ?? prm.scopes_supported.join(' ');
    for (const redirectUri of ['http://127.0.0.1:27523/callback', 'http://127.0.0.1:41877/callback']) {
      // A fresh registration on every flow.
      const reg = await r.register({
        client_name: 'Zed',
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      });
      expect(reg.status, reg.text).toBe(201);
      const clientId = reg.json.client_id as string;
      const s = await r.signIn({
        authorize: ({ challenge, state }) => ({
          response_type: 'code',
          client_id: clientId,
          redirect_uri: redirectUri,
          state,
          code_challenge: challenge,
          code_challenge_method: 'S256',
          scope,
          resource: prm.resource,
        }),
        token: ({ code, verifier }) => ({
          grant_type: 'authorization_code',
          code,
          redirect_uri: redirectUri,
          client_id: clientId,
          code_verifier: verifier,
          resource: prm.resource,
        }),
        refresh: ({ refreshToken }) => ({
          grant_type: 'refresh_token',
          refresh_token: refreshToken,
          client_id: clientId,
          resource: prm.resource,
        }),
      });
      expect(s.me).toMatchObject({ email: r.user.email, client_id: clientId });
    }
  });
});
