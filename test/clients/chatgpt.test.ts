// ChatGPT connectors / Apps (aiohttp): a per-connector metadata document declaring private_key_jwt with a
// jwks_uri, its https connector callback; the DCR path without scope and with `none` + PKCE.
// Sources:
// - CIMD, DCR or a pre-set client; resource echoed; S256 needed: https://developers.openai.com/apps-sdk/build/auth
// - document https://chatgpt.com/oauth/<id>/client.json, redirect https://chatgpt.com/connector/oauth/<id>:
//   https://github.com/Altinity/altinity-mcp/issues/118
// - the global document's connector_platform_oauth_redirect, private_key_jwt with
//   jwks_uri https://chatgpt.com/oauth/jwks.json: https://github.com/django-oauth/django-oauth-toolkit/issues/1845
// - DCR without scope: https://git.k1nq.space/k1nq/TREK/commits/commit/c64101b12a4800ce9e24416af6ed2f91b50fa654/server/tests/integration/oauth.test.ts
// - none + PKCE when private_key_jwt is not offered: https://github.com/gamedevpl/www.gamedev.pl/pull/641,
//   https://github.com/kentcdodds/kody/pull/1905
// - resource = the origin root (https://<host>/) even after reading metadata that names /mcp, looping when refused:
//   https://github.com/garrytan/gbrain/issues/5222
// The one substitution: the document's jwks_uri points at a local https server (chatgpt.com's key set is
// OpenAI's private key's, unreachable here); the test signs assertions with its own key published there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ClientFlow,
  clientKey,
  JWT_BEARER_ASSERTION,
  type ReplayStack,
  startReplayStack,
} from '../helpers/client-replay.ts';
import { operatorSettings } from '../helpers/connect-settings.ts';

const CONNECTOR = 'g-7f3c2a9e1b4d';
const DOCUMENT = `https://chatgpt.com/oauth/${CONNECTOR}/client.json`;
const CALLBACK = `https://chatgpt.com/connector/oauth/${CONNECTOR}`;
const LEGACY_CALLBACK = 'https://chatgpt.com/connector_platform_oauth_redirect';

let r: ReplayStack;
let key: Awaited<ReturnType<typeof clientKey>>;

beforeAll(async () => {
  key = await clientKey('RS256');
  r = await startReplayStack({
    // docs/connect.md's settings for ChatGPT; the per-connector document stands in for the IdP's fetch of it.
    ...operatorSettings('chatgpt'),
    documents: () => ({ '/oauth/jwks.json': key.jwks }),
    pinned: ({ docsOrigin }) => [
      {
        client_id: DOCUMENT,
        client_name: 'ChatGPT',
        redirect_uris: [CALLBACK],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'private_key_jwt',
        jwks_uri: `${docsOrigin}/oauth/jwks.json`,
      },
    ],
  });
}, 90_000);

afterAll(async () => {
  await r?.stop();
});

async function chatgpt(
  clientId: string,
  redirectUri: string,
  auth: 'private_key_jwt' | 'none',
  /** What it sends as `resource`: the metadata's (default), or another value such as the origin root. */
  resourceOf: (prmResource: string) => string = (x) => x,
): Promise<ClientFlow> {
  const { prm: read, asm } = await r.discover();
  const prm = { ...read, resource: resourceOf(read.resource) };
  const tokenEndpoint = asm.token_endpoint as string;
  const authn = async (): Promise<Array<[string, string]>> =>
    auth === 'none'
      ? [['client_id', clientId]]
      : [
          ['client_id', clientId],
          ['client_assertion_type', JWT_BEARER_ASSERTION],
          ['client_assertion', await key.assertion(clientId, tokenEndpoint)],
        ];
  return {
    authorize: ({ challenge, state }) => [
      ['response_type', 'code'],
      ['client_id', clientId],
      ['redirect_uri', redirectUri],
      ['scope', prm.scopes_supported.join(' ')],
      ['state', state],
      ['code_challenge', challenge],
      ['code_challenge_method', 'S256'],
      ['resource', prm.resource],
    ],
    token: async ({ code, verifier }) => [
      ['grant_type', 'authorization_code'],
      ['code', code],
      ['redirect_uri', redirectUri],
      ['code_verifier', verifier],
      ['resource', prm.resource],
      ...(await authn()),
    ],
    refresh: async ({ refreshToken }) => [
      ['grant_type', 'refresh_token'],
      ['refresh_token', refreshToken],
      ['resource', prm.resource],
      ...(await authn()),
    ],
  };
}

describe('ChatGPT connectors', () => {
  it('finds S256 and private_key_jwt in the metadata (OpenAI Apps SDK docs)', async () => {
    const { asm } = await r.discover();
    expect(asm.code_challenge_methods_supported).toEqual(['S256']);
    expect(asm.token_endpoint_auth_methods_supported).toEqual(
      expect.arrayContaining(['none', 'private_key_jwt']),
    );
    expect(asm.client_id_metadata_document_supported).toBe(true);
  });

  it('signs in with its pinned private_key_jwt document, authenticating with assertions at the token endpoint (Altinity#118, DOT#1845)', async () => {
    const s = await r.signIn(await chatgpt(DOCUMENT, CALLBACK, 'private_key_jwt'));
    expect(`${s.authorize.location!.origin}${s.authorize.location!.pathname}`).toBe(CALLBACK);
    expect(s.me).toMatchObject({ email: r.user.email, client_id: DOCUMENT });
    expect(r.docsRequests).toContain('GET /oauth/jwks.json');
  });

  it('a token request for the document client without its assertion is 401 invalid_client', async () => {
    const t = await r.token({ grant_type: 'refresh_token', refresh_token: 'x', client_id: DOCUMENT });
    expect(t.status, t.text).toBe(401);
    expect(t.json.error).toBe('invalid_client');
  });

  it('registers by DCR without scope and signs in as a public client with PKCE (TREK, gamedevpl#641)', async () => {
    const reg = await r.register({
      client_name: 'ChatGPT',
      redirect_uris: [LEGACY_CALLBACK],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    expect(reg.status, reg.text).toBe(201);
    const s = await r.signIn(await chatgpt(reg.json.client_id as string, LEGACY_CALLBACK, 'none'));
    expect(s.me).toMatchObject({ email: r.user.email, client_id: reg.json.client_id });
  });

  for (const slash of ['/', '']) {
    it(`sends the origin root${slash ? ' with its /' : ' without /'} as resource at authorize, token and refresh, and calls a tool (gbrain#5222)`, async () => {
      const reg = await r.register({
        client_name: 'ChatGPT',
        redirect_uris: [LEGACY_CALLBACK],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      });
      expect(reg.status, reg.text).toBe(201);
      const origin = `${new URL(r.serverUrl()).origin}${slash}`;
      const flow = await chatgpt(reg.json.client_id as string, LEGACY_CALLBACK, 'none', () => origin);
      expect(flow.authorize({ challenge: 'c', state: 's' })).toContainEqual(['resource', origin]);
      const s = await r.signIn(flow);
      expect(s.token.status, s.token.text).toBe(200);
      expect(s.refreshed.status, s.refreshed.text).toBe(200);
      expect(s.me).toMatchObject({ email: r.user.email, client_id: reg.json.client_id });
    });
  }
});
