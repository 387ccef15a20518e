// Goose (rmcp): DCR as "goose" with application_type "native" and its loopback `/oauth_callback`, scope = the
// challenge's ∪ the resource metadata's plus offline_access, `resource` = the resource metadata's, RFC 9207 `iss`
// checked, a refresh at start-up.
// Sources:
// - https://github.com/block/goose/blob/main/crates/goose/src/oauth/mod.rs (client_name, redirect, iss, refresh)
// - rmcp's DCR (none, native, code+refresh), scope, resource and issuer checks:
//   https://github.com/modelcontextprotocol/rust-sdk/blob/main/crates/rmcp/src/transport/auth.rs
import { describe, expect, it } from 'vitest';
import { useReplayStack } from '../helpers/client-replay.ts';
import { freePort } from '../helpers/processes.ts';

const r = useReplayStack();

describe('Goose', () => {
  it('registers through rmcp (native, none), signs in with offline_access, checks iss and refreshes (mod.rs, auth.rs)', async () => {
    const { challenge: wwwAuthenticate, prm, asm } = await r.discover();
    // rmcp refuses a resource metadata on another origin, a resource mismatch and an issuer mismatch.
    expect(new URL(/resource_metadata="([^"]+)"/.exec(wwwAuthenticate)![1]!).origin).toBe(
      new URL(r.serverUrl()).origin,
    );
    expect(prm.resource).toBe(r.serverUrl());
    expect(asm.issuer).toBe(prm.authorization_servers[0]);
    const fromChallenge = /scope="([^"]*)"/.exec(wwwAuthenticate)?.[1]?.split(' ') ?? [];
    const scope = [...new Set([...fromChallenge, ...prm.scopes_supported, 'offline_access'])].join(' ');
    const redirectUri = `http://127.0.0.1:${await freePort()}/oauth_callback`;
    const reg = await r.register({
      client_name: 'goose',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_method: 'none',
      response_types: ['code'],
      application_type: 'native',
    });
    expect(reg.status, reg.text).toBe(201);
    const clientId = reg.json.client_id as string;
    const s = await r.signIn({
      authorize: ({ challenge, state }) => ({
        response_type: 'code',
        client_id: clientId,
        state,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        redirect_uri: redirectUri,
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
    expect(s.authorize.location!.searchParams.get('iss')).toBe(asm.issuer);
    expect(s.me).toMatchObject({ email: r.user.email, client_id: clientId });
  });
});
