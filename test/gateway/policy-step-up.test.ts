// Scope step-up through a `require_scope` policy rule, completed by the MCP SDK client's own `auth()`: the
// client signs in with what the service's metadata offers, calls a tool the policy keeps behind another scope,
// gets 403 insufficient_scope naming it, re-authorizes for it (its own scope merging), and the call then goes
// through. Real IdP, gateway and tool servers; the "browser" is a fetch carrying the user's web session that
// approves the IdP's consent page when it is shown.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type CallToolResult,
  Client,
  type OAuthClientMetadata,
  StreamableHTTPClientTransport,
  UnauthorizedError,
} from '@modelcontextprotocol/client';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { sessionCookieName } from '../helpers/oauth.ts';
import { InMemoryOAuthProvider } from '../helpers/oauth-provider.ts';
import { type Stack, startStack } from '../tools/stack.ts';

const dir = mkdtempSync(join(tmpdir(), 'policy-step-up-'));
let stack: Stack;
let user: SeededUser;

beforeAll(async () => {
  const email = `stepper-${randomUUID().slice(0, 8)}@example.com`;
  // A connector (a dynamically registered client) steps up to another service's scope: whoami is kept for
  // callers who also hold mail access. (platform:admin is never handed to connectors, so it cannot be the
  // scope stepped up to here.)
  const file = join(dir, 'policy.yaml');
  writeFileSync(
    file,
    `rules:
  - service: platform
    tool: whoami
    effect: require_scope
    required_scope: mcp:mail
  - effect: allow
`,
  );
  stack = await startStack({ gatewayEnv: { GATEWAY_POLICY_FILE: file } });
  user = await seedUser(stack.db.pool, { email });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** In memory; the authorization "browser" is a fetch with the web-session cookie that stops at the callback. */
class CookieBrowserProvider extends InMemoryOAuthProvider {
  readonly redirectUrl = 'http://127.0.0.1:47614/callback';
  callbacks: URL[] = [];
  /** How many times the IdP showed its consent page (a newly registered client; scopes it was not given). */
  consents = 0;
  private readonly sessionToken: string;

  constructor(sessionToken: string) {
    super();
    this.sessionToken = sessionToken;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'step-up test',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  async redirectToAuthorization(url: URL) {
    const visit = await this.visit(url, {
      cookieName: sessionCookieName(url.origin),
      sessionToken: this.sessionToken,
    });
    if (visit.consentPage !== undefined) this.consents++;
    this.callbacks.push(visit.callback);
  }
}

it('403 insufficient_scope from a require_scope rule is completed by the SDK client re-authorizing', async () => {
  const serverUrl = new URL(`${stack.baseUrl}/platform/mcp`);
  const provider = new CookieBrowserProvider(user.sessionToken);
  const connect = async () => {
    const transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
    const client = new Client({ name: 'step-up', version: '1.0.0' });
    await client.connect(transport);
    return { client, transport };
  };

  // First sign-in: what the service's metadata offers (mcp:platform), not the mail scope the rule asks for.
  const first = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  await expect(new Client({ name: 'step-up', version: '1.0.0' }).connect(first)).rejects.toBeInstanceOf(
    UnauthorizedError,
  );
  await first.finishAuth(provider.callbacks.at(-1)!.searchParams);
  const before = String(decodeJwt(provider.tokens()!.access_token).scope).split(' ');
  expect(before).toContain('mcp:platform');
  expect(before).not.toContain('mcp:mail');

  // The guarded tool: the gateway answers 403 insufficient_scope scope="mcp:mail"; the SDK runs auth()
  // again for the merged scope and, the browser step being a redirect, hands the callback back to us.
  const { client, transport } = await connect();
  await expect(client.callTool({ name: 'whoami', arguments: {} })).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.callbacks).toHaveLength(2);
  const asked = new URL(provider.callbacks[1]!).searchParams;
  expect(asked.get('code')).toBeTruthy();
  await transport.finishAuth(asked);
  const after = String(decodeJwt(provider.tokens()!.access_token).scope).split(' ');
  expect(after).toEqual(expect.arrayContaining(['mcp:platform', 'mcp:mail']));
  // The user approved the client once for the first sign-in and once more for the service added by step-up.
  expect(provider.consents).toBe(2);

  // Stepped up: the same call goes through to the tool server.
  const again = await connect();
  const who = (await again.client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult;
  expect(who.isError).toBeFalsy();
  expect(JSON.stringify(who.structuredContent ?? who.content)).toContain(user.email);
});
