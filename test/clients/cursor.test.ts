// Cursor (closed source): one registration with its custom scheme, an https cursor.com callback and a loopback
// URI, all under application_type "web", public; the browser comes back on cursor://.
// Sources:
// - the three redirects in one request: https://github.com/erp-mafia/accounted/pull/2225
// - token_endpoint_auth_method none: https://github.com/different-ai/openwork/pull/3059
// - application_type "web" even with cursor://: https://github.com/elie222/inbox-zero/pull/3780
// - the CLI uses the cursor.com callback: https://github.com/bytebase/bytebase/issues/20510
// Its resource, scope and refresh requests are not captured anywhere public: they are replayed as the MCP
// specification's clients send them (resource and the resource's scopes on every request).
import { describe, expect, it } from 'vitest';
import { type ClientFlow, useReplayStack } from '../helpers/client-replay.ts';
import { operatorSettings } from '../helpers/connect-settings.ts';

const APP = 'cursor://anysphere.cursor-mcp/oauth/callback';
const WEB = 'https://www.cursor.com/agents/mcp/oauth/callback';
const LOOPBACK = 'http://localhost:8787/callback';

// docs/connect.md's settings for Cursor, exactly.
const r = useReplayStack(operatorSettings('cursor'));

async function cursor(clientId: string, redirectUri: string): Promise<ClientFlow> {
  const { prm } = await r.discover();
  return {
    authorize: ({ challenge, state }) => ({
      response_type: 'code',
      client_id: clientId,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      redirect_uri: redirectUri,
      state,
      scope: prm.scopes_supported.join(' '),
      resource: prm.resource,
    }),
    token: ({ code, verifier }) => ({
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      client_id: clientId,
      redirect_uri: redirectUri,
      resource: prm.resource,
    }),
    refresh: ({ refreshToken }) => ({
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: clientId,
      resource: prm.resource,
    }),
  };
}

describe('Cursor', () => {
  it('registers as Cursor does (web with cursor://, cursor.com and loopback — accounted#2225, inbox-zero#3780) and signs in through each callback', async () => {
    const reg = await r.register({
      client_name: 'Cursor',
      redirect_uris: [APP, WEB, LOOPBACK],
      application_type: 'web',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    });
    expect(reg.status, reg.text).toBe(201);
    expect(reg.json.redirect_uris).toEqual([APP, WEB, LOOPBACK]);
    const clientId = reg.json.client_id as string;
    const app = await r.signIn(await cursor(clientId, APP));
    expect(app.authorize.location!.href.startsWith(`${APP}?`)).toBe(true);
    expect(app.me).toMatchObject({ email: r.user.email, client_id: clientId });
    const web = await r.signIn(await cursor(clientId, WEB));
    expect(web.authorize.location!.href.startsWith(`${WEB}?`)).toBe(true);
    await r.signIn(await cursor(clientId, LOOPBACK));
  });
});
