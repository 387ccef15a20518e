// Step-up authorization end to end, with the MCP SDK v2 client's own machinery: the gateway's per-tool policy
// requires a scope the client's token lacks (whoami reveals the email, so it requires `email`), the gateway
// answers 403 insufficient_scope naming it, the SDK re-authorizes for the union of its scopes, and the call
// succeeds — without a second consent page, since the client's services were already consented.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  auth,
  Client,
  type OAuthClientMetadata,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  type OAuthTokens,
  type StoredOAuthClientInformation,
  StreamableHTTPClientTransport,
  UnauthorizedError,
} from '@modelcontextprotocol/client';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { answerConsent } from '../helpers/oauth.ts';
import { toolJson } from './helpers.ts';
import { type Stack, startStack } from './stack.ts';

const COOKIE = 'authjs.session-token';
const POLICY = `rules:
  - service: platform
    tool: whoami
    effect: require_scope
    required_scope: email
  - effect: allow
`;

let dir: string;
let stack: Stack;
let user: SeededUser;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'platform-step-up-'));
  await writeFile(join(dir, 'policy.yaml'), POLICY);
  stack = await startStack({ gatewayEnv: { GATEWAY_POLICY_FILE: join(dir, 'policy.yaml') } });
  user = await seedUser(stack.db.pool);
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** In memory; the "browser" carries the user's web session and approves a consent page when one is shown. */
class BrowserProvider implements OAuthClientProvider {
  readonly redirectUrl = 'http://127.0.0.1:47616/callback';
  consentPagesShown = 0;
  authorizationUrls: URL[] = [];
  callback: URL | undefined;
  private info: StoredOAuthClientInformation | undefined;
  private saved: OAuthTokens | undefined;
  private verifier = '';
  private discovery: OAuthDiscoveryState | undefined;
  private readonly expectedState = randomBytes(16).toString('hex');

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Step-up test client',
      redirect_uris: [this.redirectUrl],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    return this.expectedState;
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: StoredOAuthClientInformation) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
  async redirectToAuthorization(url: URL) {
    this.authorizationUrls.push(url);
    const headers = { cookie: `${COOKIE}=${user.sessionToken}` };
    let res = await fetch(url, { redirect: 'manual', headers });
    let location = res.headers.get('location');
    if (res.status === 200) {
      this.consentPagesShown++;
      const answer = await answerConsent({
        url: url.href,
        html: await res.text(),
        sessionToken: user.sessionToken,
        cookieName: COOKIE,
        decision: 'approve',
      });
      res = answer.res;
      location = answer.location?.href ?? null;
    }
    if (res.status !== 302 || !location) throw new Error(`authorize answered ${res.status}`);
    this.callback = new URL(location);
    if (this.callback.searchParams.get('state') !== this.expectedState) throw new Error('state mismatch');
  }
}

it('403 insufficient_scope → the SDK re-authorizes for the union → the call succeeds, no second consent', async () => {
  const serverUrl = new URL(`${stack.baseUrl}/platform/mcp`);
  const provider = new BrowserProvider();

  // First sign-in for the platform service only (and openid): one consent page.
  expect(await auth(provider, { serverUrl, scope: 'openid mcp:platform' })).toBe('REDIRECT');
  const first = provider.callback!;
  expect(
    await auth(provider, {
      serverUrl,
      authorizationCode: first.searchParams.get('code')!,
      iss: first.searchParams.get('iss') ?? undefined,
    }),
  ).toBe('AUTHORIZED');
  expect(provider.consentPagesShown).toBe(1);
  expect(provider.tokens()!.scope).toBe('openid mcp:platform');

  const transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  const client = new Client({ name: 'step-up', version: '1.0.0' });
  await client.connect(transport);
  try {
    // The policy wants `email` for whoami: 403 insufficient_scope, and the SDK starts the step-up itself.
    await expect(client.callTool({ name: 'whoami', arguments: {} })).rejects.toBeInstanceOf(
      UnauthorizedError,
    );
    expect(provider.authorizationUrls).toHaveLength(2);
    const asked = new Set(provider.authorizationUrls[1]!.searchParams.get('scope')!.split(' '));
    expect(asked).toEqual(new Set(['openid', 'mcp:platform', 'email']));
    // Already-consented services: the IdP answered with a code at once.
    expect(provider.consentPagesShown).toBe(1);

    await transport.finishAuth(provider.callback!.searchParams);
    expect(decodeJwt(provider.tokens()!.access_token).scope).toBe('openid email mcp:platform');
    const me = toolJson(await client.callTool({ name: 'whoami', arguments: {} }));
    expect(me).toMatchObject({ email: user.email, sub: user.sub, issuer: 'platform' });
  } finally {
    await client.close();
  }
});
