// VS Code (Copilot agent mode): DCR with application_type "native" and two vscode.dev https redirects beside
// two loopback ones, its metadata document at vscode.dev, the loopback port 33418 (or a random one when busy),
// `resource` on authorize, token and refresh.
// Sources:
// - DCR body (client_name, client_uri https://code.visualstudio.com, grant types = the provider's ∩ {code,
//   refresh, device_code}, response_types, the four redirects, scope, none, application_type native) and the
//   document https://vscode.dev/oauth/client-metadata.json: https://github.com/microsoft/vscode/blob/main/src/vs/base/common/oauth.ts,
//   https://github.com/koala73/worldmonitor/pull/8305
// - random port when 33418 is busy: https://github.com/microsoft/vscode/issues/278512
// - PRM `resource` must equal the server URL: https://github.com/microsoft/vscode/blob/main/src/vs/base/common/oauth.ts
import { describe, expect, it } from 'vitest';
import { type ClientFlow, useReplayStack } from '../helpers/client-replay.ts';
import { operatorSettings } from '../helpers/connect-settings.ts';
import { freePort } from '../helpers/processes.ts';

const DOCUMENT = 'https://vscode.dev/oauth/client-metadata.json';
const WEB = ['https://insiders.vscode.dev/redirect', 'https://vscode.dev/redirect'];

// docs/connect.md's settings for VS Code, exactly (its vscode.dev redirects, deploy/cimd-pinned/vscode.json).
const r = useReplayStack(operatorSettings('vscode'));

async function vscode(clientId: string, redirectUri: string): Promise<ClientFlow> {
  const { prm } = await r.discover();
  return {
    authorize: ({ challenge, state }) => ({
      client_id: clientId,
      response_type: 'code',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      scope: prm.scopes_supported.join(' '),
      redirect_uri: redirectUri,
      state,
      resource: prm.resource,
    }),
    token: ({ code, verifier }) => ({
      client_id: clientId,
      code,
      grant_type: 'authorization_code',
      code_verifier: verifier,
      redirect_uri: redirectUri,
      resource: prm.resource,
    }),
    refresh: ({ refreshToken }) => ({
      client_id: clientId,
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      resource: prm.resource,
    }),
  };
}

describe('VS Code', () => {
  it('finds a resource metadata whose resource is exactly the server URL (oauth.ts)', async () => {
    const { prm } = await r.discover();
    expect(prm.resource).toBe(r.serverUrl());
  });

  it('registers as VS Code does (native with vscode.dev https redirects and loopback ones — oauth.ts, worldmonitor#8305) and signs in on 33418', async () => {
    const { asm, prm } = await r.discover();
    const wanted = ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'];
    const reg = await r.register({
      client_name: 'Visual Studio Code',
      client_uri: 'https://code.visualstudio.com',
      grant_types: wanted.filter((g) => (asm.grant_types_supported as string[]).includes(g)),
      response_types: ['code'],
      redirect_uris: [...WEB, 'http://127.0.0.1/', 'http://127.0.0.1:33418/'],
      scope: prm.scopes_supported.join(' '),
      token_endpoint_auth_method: 'none',
      application_type: 'native',
    });
    expect(reg.status, reg.text).toBe(201);
    expect(reg.json.grant_types).toContain('urn:ietf:params:oauth:grant-type:device_code');
    const s = await r.signIn(await vscode(reg.json.client_id as string, 'http://127.0.0.1:33418/'));
    expect(s.me).toMatchObject({ email: r.user.email, client_id: reg.json.client_id });
    // The web flow's callback is accepted too.
    const web = await r.signIn(await vscode(reg.json.client_id as string, 'https://vscode.dev/redirect'));
    expect(web.authorize.location!.href.startsWith('https://vscode.dev/redirect?')).toBe(true);
  });

  it('signs in with its pinned document on a random port when 33418 is busy (vscode#278512)', async () => {
    const s = await r.signIn(await vscode(DOCUMENT, `http://127.0.0.1:${await freePort()}/`));
    expect(s.me).toMatchObject({ email: r.user.email, client_id: DOCUMENT });
  });
});
