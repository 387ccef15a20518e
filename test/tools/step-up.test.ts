import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  auth,
  Client,
  type OAuthClientMetadata,
  StreamableHTTPClientTransport,
  UnauthorizedError,
} from '@modelcontextprotocol/client';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { InMemoryOAuthProvider } from '../helpers/oauth-provider.ts';
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
class BrowserProvider extends InMemoryOAuthProvider {
  readonly redirectUrl = 'http://127.0.0.1:47616/callback';
  consentPagesShown = 0;
  authorizationUrls: URL[] = [];
  callback: URL | undefined;

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Step-up test client',
      redirect_uris: [this.redirectUrl],
      token_endpoint_auth_method: 'none',
    };
  }
  async redirectToAuthorization(url: URL) {
    this.authorizationUrls.push(url);
    const visit = await this.visit(url, { cookieName: COOKIE, sessionToken: user.sessionToken });
    if (visit.consentPage !== undefined) this.consentPagesShown++;
    this.callback = visit.callback;
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
