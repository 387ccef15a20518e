// Claude.ai and Claude Desktop connectors (one hosted backend, python-httpx), replayed as they really send:
// the pinned metadata document (its host refuses fetches from data-centre addresses), the DCR fallback with
// client_secret_post, authorize with prompt=consent and offline_access, token and refresh, whoami at the gateway.
// Sources:
// - CIMD document and when Claude uses it: https://claude.com/docs/connectors/building/authentication
// - document host answers 403 to data-centre fetches: https://github.com/anthropics/claude-ai-mcp/issues/650
// - DCR body (client_secret_post, no application_type, no scope): https://github.com/PostHog/posthog/pull/48397
//   and still so in Sep 2026: https://github.com/anthropics/claude-ai-mcp/issues/1043
// - second callback on claude.com: https://github.com/RevenueCat/ai-toolkit/issues/58
// - authorize with resource, S256, state, prompt=consent, offline_access: https://github.com/anthropics/claude-ai-mcp/issues/96
//   scope from the resource's metadata plus offline_access: https://github.com/anthropics/claude-ai-mcp/issues/42
// - client_secret_post at the token endpoint: https://github.com/anthropics/claude-ai-mcp/issues/667
// - 401 invalid_client makes it register again:
//   https://support.anthropic.com/en/articles/11503834-building-custom-connectors-via-remote-mcp-servers

import { describe, expect, it } from 'vitest';
import { pkcePair, useReplayStack } from '../helpers/client-replay.ts';
import { operatorSettings } from '../helpers/connect-settings.ts';

const CALLBACK = 'https://claude.ai/api/mcp/auth_callback';
const DOCUMENT = 'https://claude.ai/oauth/mcp-oauth-client-metadata';

// docs/connect.md's settings for Claude.ai, exactly (its callbacks, deploy/cimd-pinned/claude-ai.json).
const r = useReplayStack(operatorSettings('claude-ai'));

/** authorize → token → refresh → whoami as Claude's backend sends them; returns what whoami saw. */
async function signInAsClaude(client: { clientId: string; secret?: string }) {
  const { prm } = await r.discover();
  const { verifier, challenge } = pkcePair();
  const state = 'claude-state-1';
  const a = await r.authorize([
    ['response_type', 'code'],
    ['client_id', client.clientId],
    ['redirect_uri', CALLBACK],
    ['code_challenge', challenge],
    ['code_challenge_method', 'S256'],
    ['state', state],
    ['scope', `${prm.scopes_supported.join(' ')} offline_access`],
    ['resource', prm.resource],
    ['prompt', 'consent'],
  ]);
  expect(a.status, a.body).toBe(302);
  expect(a.consentShown).toBe(true);
  expect(`${a.location!.origin}${a.location!.pathname}`).toBe(CALLBACK);
  expect(a.location!.searchParams.get('state')).toBe(state);
  expect(a.location!.searchParams.get('iss')).toBe(r.issuer);
  const secret: Record<string, string> = client.secret ? { client_secret: client.secret } : {};
  const t = await r.token({
    grant_type: 'authorization_code',
    code: a.code!,
    redirect_uri: CALLBACK,
    code_verifier: verifier,
    client_id: client.clientId,
    ...secret,
    resource: prm.resource,
  });
  expect(t.status, t.text).toBe(200);
  expect(t.json.refresh_token).toEqual(expect.any(String));
  const rt = await r.token({
    grant_type: 'refresh_token',
    refresh_token: t.json.refresh_token as string,
    client_id: client.clientId,
    ...secret,
    resource: prm.resource,
  });
  expect(rt.status, rt.text).toBe(200);
  return r.whoami(rt.json.access_token as string);
}

describe('Claude.ai / Claude Desktop', () => {
  it('finds a metadata-document provider that also accepts public clients, as Claude requires before using its document (claude.com docs)', async () => {
    const { asm, prm } = await r.discover();
    expect(prm.authorization_servers).toEqual([r.issuer]);
    expect(asm.client_id_metadata_document_supported).toBe(true);
    expect(asm.token_endpoint_auth_methods_supported).toContain('none');
    expect(asm.code_challenge_methods_supported).toEqual(['S256']);
    expect(asm.scopes_supported).toContain('offline_access');
  });

  it('signs in with its pinned metadata document, never fetched from claude.ai (cam#650), and calls whoami', async () => {
    const me = await signInAsClaude({ clientId: DOCUMENT });
    expect(me).toMatchObject({ email: r.user.email, client_id: DOCUMENT });
  });

  it('registers as Claude.ai does (DCR with client_secret_post, no application_type, no scope — PostHog#48397, cam#1043)', async () => {
    const reg = await r.register({
      redirect_uris: [CALLBACK],
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      client_name: 'Claude',
    });
    expect(reg.status, reg.text).toBe(201);
    expect(reg.json).toMatchObject({
      token_endpoint_auth_method: 'client_secret_post',
      client_secret: expect.any(String),
      client_secret_expires_at: 0,
      redirect_uris: [CALLBACK],
    });
    expect(Object.values(reg.json)).not.toContain(null);
    const me = await signInAsClaude({
      clientId: reg.json.client_id as string,
      secret: reg.json.client_secret as string,
    });
    expect(me).toMatchObject({ email: r.user.email, client_id: reg.json.client_id });
  });

  it('gets 401 invalid_client for a wrong secret or a forgotten client, on which Claude registers again (support article)', async () => {
    const reg = await r.register({
      redirect_uris: [CALLBACK],
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      client_name: 'Claude',
    });
    expect(reg.status, reg.text).toBe(201);
    for (const [clientId, secret] of [
      [reg.json.client_id as string, 'not-the-secret'],
      ['a-client-this-provider-forgot', reg.json.client_secret as string],
    ]) {
      const t = await r.token({
        grant_type: 'refresh_token',
        refresh_token: 'whatever',
        client_id: clientId!,
        client_secret: secret!,
      });
      expect(t.status, t.text).toBe(401);
      expect(t.json.error).toBe('invalid_client');
    }
  });
});
