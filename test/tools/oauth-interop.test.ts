// Interop with a client nobody here wrote: the MCP SDK's own OAuth flow (its transport calling `auth()` with
// an OAuthClientProvider), starting from nothing but the gateway URL of a service. It must discover the
// protected-resource metadata, then the IdP's metadata, register dynamically, authorize (the browser step is
// a GET carrying the web-session cookie), exchange the code and call `whoami` through the gateway.
import { randomBytes } from 'node:crypto';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { answerConsent, sessionCookieName } from '../helpers/oauth.ts';
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

/** An in-memory provider; the "browser" is a fetch with the user's web-session cookie. */
class CookieBrowserProvider implements OAuthClientProvider {
  readonly redirectUrl = 'http://127.0.0.1:47613/callback';
  authorizationUrl: URL | undefined;
  callback: URL | undefined;
  private info: OAuthClientInformationMixed | undefined;
  private saved: OAuthTokens | undefined;
  private verifier = '';
  private readonly expectedState = randomBytes(16).toString('hex');

  private readonly sessionToken: string;

  constructor(sessionToken: string) {
    this.sessionToken = sessionToken;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'MCP SDK interop test',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    return this.expectedState;
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
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
  consentShown = false;
  async redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
    const cookieName = sessionCookieName(url.origin);
    const res = await fetch(url, {
      redirect: 'manual',
      headers: { cookie: `${cookieName}=${this.sessionToken}` },
    });
    let status = res.status;
    let location = res.headers.get('location');
    if (status === 200) {
      // A newly registered client: the user approves it on the consent page.
      this.consentShown = true;
      const answer = await answerConsent({
        url: url.href,
        html: await res.text(),
        sessionToken: this.sessionToken,
        cookieName,
        decision: 'approve',
      });
      status = answer.status;
      location = answer.location?.href ?? null;
    }
    if (status !== 302 || !location) throw new Error(`authorize answered ${status}`);
    this.callback = new URL(location);
    // A real client checks the state it sent before using the code; so does this one.
    if (this.callback.searchParams.get('state') !== this.expectedState) throw new Error('state mismatch');
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
  expect(provider.consentShown).toBe(true);

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
