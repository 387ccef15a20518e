// OpenCode (MCP TypeScript SDK v1 inside): DCR with its fixed loopback callback, no offline_access, parallel
// sessions refreshing one token; its metadata document lists `/callback` while the client sends
// `/mcp/oauth/callback`, which a provider must refuse (on its own page, never redirecting).
// Sources:
// - DCR (client_name "OpenCode", client_uri, http://127.0.0.1:19876/mcp/oauth/callback, code+refresh, none):
//   https://github.com/anomalyco/opencode/blob/dev/packages/opencode/src/mcp/oauth-provider.ts
// - document https://opencode.ai/oauth/opencode/client.json lists /callback: https://github.com/anomalyco/opencode/issues/50510
// - never adds offline_access: https://github.com/anomalyco/opencode/issues/34034
// - parallel sessions trip strict rotation: https://github.com/buildinternet/uploads/pull/909
import { describe, expect, it } from 'vitest';
import { type ClientFlow, useReplayStack } from '../helpers/client-replay.ts';

const DOCUMENT = 'https://opencode.ai/oauth/opencode/client.json';
const CALLBACK = 'http://127.0.0.1:19876/mcp/oauth/callback';

const r = useReplayStack({
  pinned: [
    {
      client_id: DOCUMENT,
      client_name: 'OpenCode',
      redirect_uris: ['http://127.0.0.1:19876/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    },
  ],
});

async function opencode(clientId: string): Promise<ClientFlow> {
  const { prm } = await r.discover();
  return {
    authorize: ({ challenge, state }) => ({
      response_type: 'code',
      client_id: clientId,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      redirect_uri: CALLBACK,
      state,
      scope: prm.scopes_supported.join(' '),
      resource: prm.resource,
    }),
    token: ({ code, verifier }) => ({
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      redirect_uri: CALLBACK,
      resource: prm.resource,
      client_id: clientId,
    }),
    refresh: ({ refreshToken }) => ({
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      resource: prm.resource,
      client_id: clientId,
    }),
  };
}

describe('OpenCode', () => {
  it('registers as OpenCode does (oauth-provider.ts), signs in without offline_access (oc#34034) and gets a refresh token', async () => {
    const reg = await r.register({
      redirect_uris: [CALLBACK],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      client_name: 'OpenCode',
      client_uri: 'https://opencode.ai',
    });
    expect(reg.status, reg.text).toBe(201);
    const flow = await opencode(reg.json.client_id as string);
    const s = await r.signIn(flow);
    expect(s.me).toMatchObject({ email: r.user.email, client_id: reg.json.client_id });
    // Two sessions present the same refresh token (uploads#909): both keep working.
    const t = s.refreshed.json.refresh_token as string;
    const both = await Promise.all([0, 1].map(async () => r.token(await flow.refresh({ refreshToken: t }))));
    for (const a of both) expect(a.status, a.text).toBe(200);
  });

  it("is refused on the provider's page when it sends /mcp/oauth/callback for a document listing /callback (oc#50510)", async () => {
    const flow = await opencode(DOCUMENT);
    const sent = flow.authorize({ challenge: 'x'.repeat(43), state: 's' }) as Record<string, string>;
    // The document's own callback works (the document is pinned and approved) ...
    const listed = await r.authorize({ ...sent, redirect_uri: 'http://127.0.0.1:19876/callback' });
    expect(listed.status, listed.body).toBe(302);
    expect(listed.code).toEqual(expect.any(String));
    // ... the one OpenCode really sends is not, and the browser is not sent there.
    const a = await r.authorize(sent);
    expect(a.status).toBe(400);
    expect(a.location).toBeUndefined();
  });
});
