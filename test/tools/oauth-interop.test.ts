import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { sessionCookieName } from '../helpers/oauth.ts';
import { SignedInProvider } from '../helpers/oauth-provider.ts';
import { toolJson } from './helpers.ts';
import { type Stack, startStack } from './stack.ts';

let stack: Stack;
let user: SeededUser;

beforeAll(async () => {
  stack = await startStack();
  user = await seedUser(stack.db.pool);
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

/** The SDK's provider kept in memory; the "browser" is a fetch with the user's web-session cookie. */
class CookieBrowserProvider extends SignedInProvider {
  authorizationUrl: URL | undefined;
  constructor(sessionToken: string) {
    const redirectUrl = 'http://127.0.0.1:47613/callback';
    super(
      redirectUrl,
      {
        client_name: 'MCP SDK interop test',
        redirect_uris: [redirectUrl],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      },
      () => ({ cookieName: sessionCookieName(stack.idp.issuer), sessionToken }),
    );
  }
  override async redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
    await super.redirectToAuthorization(url);
  }
}

it('discovers, registers, authorizes, exchanges and calls whoami through the gateway', async () => {
  const serverUrl = new URL(`${stack.baseUrl}/platform/mcp`);
  const seen: string[] = [];
  const recordingFetch = (url: string | URL, init?: RequestInit) => {
    seen.push(`${init?.method ?? 'GET'} ${new URL(url.toString()).href}`);
    return fetch(url, init);
  };
  const provider = new CookieBrowserProvider(user.sessionToken);

  // 1. Unauthenticated connect: 401 → resource metadata → IdP metadata → registration → authorization.
  const first = new StreamableHTTPClientTransport(serverUrl, {
    authProvider: provider,
    fetch: recordingFetch,
  });
  await expect(new Client({ name: 'interop', version: '1.0.0' }).connect(first)).rejects.toBeInstanceOf(
    UnauthorizedError,
  );

  const issuer = stack.idp.issuer;
  // In this order: the MCP request answered 401 with `resource_metadata`, the metadata it names, the IdP's
  // metadata (RFC 8414) found from `authorization_servers`, and dynamic registration (RFC 7591).
  expect(seen).toEqual([
    `POST ${serverUrl.href}`,
    `GET ${stack.baseUrl}/platform/.well-known/oauth-protected-resource`,
    `GET ${issuer}/.well-known/oauth-authorization-server`,
    `POST ${issuer}/oauth/register`,
  ]);
  const clientId = (provider.clientInformation() as { client_id: string }).client_id;
  expect(clientId).toBeTruthy();
  const auth = provider.authorizationUrl!;
  expect(`${auth.origin}${auth.pathname}`).toBe(`${issuer}/oauth/authorize`);
  expect(Object.fromEntries(auth.searchParams)).toMatchObject({
    response_type: 'code',
    client_id: clientId,
    code_challenge_method: 'S256',
    redirect_uri: provider.redirectUrl,
    resource: serverUrl.href,
  });
  expect(auth.searchParams.get('scope')?.split(' ')).toContain('mcp:platform');
  expect(provider.callback!.searchParams.get('iss')).toBe(issuer);
  // A newly registered client: the user approved it on the consent page.
  expect(provider.consentPage).toBeDefined();

  // 2. The client was "redirected back" with the code: the SDK exchanges it (PKCE) at the token endpoint.
  await first.finishAuth(provider.callback!.searchParams.get('code')!);
  expect(seen).toContain(`POST ${issuer}/oauth/token`);
  const tokens = provider.tokens()!;
  expect(tokens.token_type).toMatch(/^bearer$/i);

  // 3. Connected with the token through the gateway.
  const transport = new StreamableHTTPClientTransport(serverUrl, {
    authProvider: provider,
    fetch: recordingFetch,
  });
  const client = new Client({ name: 'interop', version: '1.0.0' });
  await client.connect(transport);
  try {
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['whoami']);
    const me = toolJson((await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult);
    expect(me).toMatchObject({ email: user.email, sub: user.sub, issuer: 'platform', client_id: clientId });
    expect((me.scope as string).split(' ')).toContain('mcp:platform');
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});
