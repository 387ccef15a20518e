// Claude Code (the CLI, Bun): its metadata document with port-less loopback redirects, an ephemeral
// `localhost` port at run time, RFC 9207 `iss` enforced, the DCR fallback without scope and without null
// members in the answer, and several processes refreshing one token at once.
// Sources:
// - document https://claude.ai/oauth/claude-code-client-metadata, redirects http://localhost/callback and
//   http://127.0.0.1/callback, auth method none; DCR fallback body without scope; scope = the resource's
//   scopes plus offline_access: https://github.com/appstrate/appstrate/issues/1267
// - the document's host refuses data-centre fetches: https://github.com/anthropics/claude-code/issues/84263
// - run time redirect http://localhost:<ephemeral>/callback: https://github.com/anthropics/claude-code/issues/56557
//   (host and path hard-coded: https://github.com/anthropics/claude-code/issues/66511)
// - null client_uri/logo_uri in a registration answer rejected: https://github.com/anthropics/claude-code/issues/52565
// - RFC 9207 enforced (missing or different iss is fatal): https://github.com/twentyhq/twenty/issues/24153,
//   https://github.com/higgsfield-ai/cli/issues/68
// - concurrent sessions refresh one token: https://github.com/anthropics/claude-code/issues/85236
// - 2.1.251 sends no resource at all (anthropics/claude-code#90497), and its refresh omits scope (#89862)
import { describe, expect, it } from 'vitest';
import { type ClientFlow, useReplayStack } from '../helpers/client-replay.ts';
import { operatorSettings } from '../helpers/connect-settings.ts';
import { freePort } from '../helpers/processes.ts';

const DOCUMENT = 'https://claude.ai/oauth/claude-code-client-metadata';

// docs/connect.md's settings for Claude Code, exactly (its pinned document, deploy/cimd-pinned/claude-code.json).
const r = useReplayStack(operatorSettings('claude-code'));

async function claudeCode(clientId: string, o: { resource?: boolean } = {}): Promise<ClientFlow> {
  const { prm } = await r.discover();
  // Without a resource (2.1.251): the parameter is left out of every request.
  const resource: Record<string, string> = o.resource === false ? {} : { resource: prm.resource };
  const redirectUri = `http://localhost:${await freePort()}/callback`;
  const scope = [...prm.scopes_supported, 'offline_access'].join(' ');
  return {
    authorize: ({ challenge, state }) => ({
      response_type: 'code',
      client_id: clientId,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      redirect_uri: redirectUri,
      state,
      scope,
      ...resource,
    }),
    token: ({ code, verifier }) => ({
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      client_id: clientId,
      redirect_uri: redirectUri,
      ...resource,
    }),
    refresh: ({ refreshToken }) => ({
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: clientId,
      ...resource,
    }),
  };
}

describe('Claude Code', () => {
  it('signs in with its pinned document from http://localhost:<ephemeral>/callback (cc#56557) and calls whoami', async () => {
    const { asm } = await r.discover();
    expect(asm.authorization_response_iss_parameter_supported).toBe(true);
    const s = await r.signIn(await claudeCode(DOCUMENT));
    // Claude Code refuses the callback unless `iss` is there and equals the metadata's issuer (RFC 9207).
    expect(s.authorize.location!.searchParams.get('iss')).toBe(asm.issuer);
    expect(s.me).toMatchObject({ email: r.user.email, client_id: DOCUMENT });
  });

  it('registers by DCR without scope (appstrate#1267) and gets an answer without null members (cc#52565)', async () => {
    const reg = await r.register({
      client_name: 'Claude Code (platform)',
      redirect_uris: ['http://localhost/callback', 'http://127.0.0.1/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    expect(reg.status, reg.text).toBe(201);
    for (const [k, v] of Object.entries(reg.json)) expect(v, k).not.toBeNull();
    const s = await r.signIn(await claudeCode(reg.json.client_id as string));
    expect(s.me).toMatchObject({ email: r.user.email, client_id: reg.json.client_id });
  });

  it('two Claude Code processes refresh the same token at once and both keep working (cc#85236)', async () => {
    const flow = await claudeCode(DOCUMENT);
    const s = await r.signIn(flow);
    let chains = [s.refreshed.json.refresh_token as string, s.refreshed.json.refresh_token as string];
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        chains.map(async (t) => r.token(await flow.refresh({ refreshToken: t }))),
      );
      for (const a of answers) expect(a.status, a.text).toBe(200);
      // The first round presents one token twice; from then on each process keeps its own chain.
      chains = answers.map((a) => a.json.refresh_token as string);
    }
    for (const t of chains) {
      const last = await r.token(await flow.refresh({ refreshToken: t }));
      expect(last.status, last.text).toBe(200);
      expect(await r.whoami(last.json.access_token as string)).toMatchObject({ email: r.user.email });
    }
  });

  it('2.1.251: no resource at authorize, token or refresh (cc#90497), a refresh without scope (cc#89862)', async () => {
    const flow = await claudeCode(DOCUMENT, { resource: false });
    expect(Object.keys(flow.authorize({ challenge: 'c', state: 's' }))).not.toContain('resource');
    expect(Object.keys(await flow.refresh({ refreshToken: 'r' }))).not.toContain('scope');
    const s = await r.signIn(flow);
    expect(s.token.status, s.token.text).toBe(200);
    expect(s.refreshed.status, s.refreshed.text).toBe(200);
    expect(s.me).toMatchObject({ email: r.user.email, client_id: DOCUMENT });
  });
});
