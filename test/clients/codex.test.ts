// OpenAI Codex (CLI and app, rmcp): its per-server metadata document (or DCR as "Codex"), the loopback
// callback `http://127.0.0.1:<port>/callback/<id>`, scopes taken from the provider's metadata, `resource`
// sent twice at authorize and never on refresh, and sessions holding an already-rotated refresh token.
// Sources:
// - CIMD https://chatgpt.com/oauth/codex/{b64url(sha256(url)[:9])}/client.json, none, loopback-only redirects
//   (the constant .../codex/client.json unused): https://github.com/speakeasy-api/gram/pull/5516
// - callback http://127.0.0.1:<port>/callback/<id>, DCR client_name "Codex":
//   https://github.com/openai/codex/blob/main/codex-rs/rmcp-client/src/perform_oauth_login.rs,
//   https://github.com/openai/codex/issues/30460
// - scopes from the authorization server's metadata: https://github.com/openai/codex/issues/35253
// - no scope in DCR: https://github.com/openai/codex/issues/20503
// - resource duplicated by oauth_resource: https://github.com/openai/codex/issues/28830
// - no resource on refresh: https://github.com/openai/codex/issues/33403
// - sessions share the keyring and hold stale refresh tokens: https://github.com/exceptionless/Exceptionless/pull/2404,
//   https://github.com/speakeasy-api/gram/pull/5333
// The document's exact redirect list is not public beyond "loopback only": it lists the callback without a port.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClientFlow, type ReplayStack, startReplayStack } from '../helpers/client-replay.ts';
import { operatorSettings } from '../helpers/connect-settings.ts';
import { freePort } from '../helpers/processes.ts';

const CALLBACK_ID = 'platform';
let r: ReplayStack;
let document: string;

beforeAll(async () => {
  r = await startReplayStack({
    // docs/connect.md's settings for Codex (none); the pinned document stands in for the IdP's fetch of it.
    ...operatorSettings('codex'),
    // The document URL hashes the MCP server URL.
    pinned: ({ baseUrl }) => {
      const hash = createHash('sha256').update(`${baseUrl}/platform/mcp`).digest().subarray(0, 9);
      document = `https://chatgpt.com/oauth/codex/${hash.toString('base64url')}/client.json`;
      return [
        {
          client_id: document,
          client_name: 'Codex',
          redirect_uris: [`http://127.0.0.1/callback/${CALLBACK_ID}`],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
        },
      ];
    },
  });
}, 90_000);

afterAll(async () => {
  await r?.stop();
});

async function codex(clientId: string): Promise<ClientFlow> {
  const { prm, asm } = await r.discover();
  const redirectUri = `http://127.0.0.1:${await freePort()}/callback/${CALLBACK_ID}`;
  return {
    authorize: ({ challenge, state }) => [
      ['response_type', 'code'],
      ['client_id', clientId],
      ['state', state],
      ['code_challenge', challenge],
      ['code_challenge_method', 'S256'],
      ['redirect_uri', redirectUri],
      ['scope', asm.scopes_supported.join(' ')],
      ['resource', prm.resource],
      ['resource', prm.resource],
    ],
    token: ({ code, verifier }) => [
      ['grant_type', 'authorization_code'],
      ['code', code],
      ['redirect_uri', redirectUri],
      ['client_id', clientId],
      ['code_verifier', verifier],
      ['resource', prm.resource],
    ],
    refresh: ({ refreshToken }) => [
      ['grant_type', 'refresh_token'],
      ['refresh_token', refreshToken],
      ['client_id', clientId],
    ],
  };
}

describe('Codex', () => {
  it('signs in with its per-server pinned document, every scope the metadata lists, resource twice, and refreshes without resource (gram#5516, cx#35253, cx#28830, cx#33403)', async () => {
    const s = await r.signIn(await codex(document));
    expect(s.me).toMatchObject({ email: r.user.email, client_id: document });
    // Asking for everything listed grants no administrative power to a third-party client.
    expect(String(s.token.json.scope).split(' ')).not.toContain('platform:admin');
    expect(s.refreshed.json.scope).toBe(s.token.json.scope);
  });

  it('registers by DCR as "Codex" without scope (cx#20503) and signs in', async () => {
    const reg = await r.register({
      client_name: 'Codex',
      redirect_uris: [`http://127.0.0.1:${await freePort()}/callback/${CALLBACK_ID}`],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    expect(reg.status, reg.text).toBe(201);
    const s = await r.signIn(await codex(reg.json.client_id as string));
    expect(s.me).toMatchObject({ email: r.user.email, client_id: reg.json.client_id });
  });

  it('a second session refreshing with the token another session already rotated keeps working (Exceptionless#2404)', async () => {
    const flow = await codex(document);
    const s = await r.signIn(flow);
    const stale = s.refreshed.json.refresh_token as string;
    const first = await r.token(await flow.refresh({ refreshToken: stale }));
    expect(first.status, first.text).toBe(200);
    const second = await r.token(await flow.refresh({ refreshToken: stale }));
    expect(second.status, second.text).toBe(200);
    for (const a of [first, second]) {
      const next = await r.token(await flow.refresh({ refreshToken: a.json.refresh_token as string }));
      expect(next.status, next.text).toBe(200);
    }
  });
});
