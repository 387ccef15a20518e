// The MCP TypeScript SDK v2 client (@modelcontextprotocol/client) runs for real, as a public client and as a
// confidential one (client_secret_basic, which it prefers when registered): auth() discovers, registers,
// authorizes (browser-less consent), exchanges the code with the RFC 9207 `iss`, calls whoami through the
// gateway, refreshes with `resource`, and calls whoami again.
// Source of its rules: https://github.com/modelcontextprotocol/typescript-sdk/blob/main/packages/client/src/client/auth.ts
import { auth, Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { type RecordedRequest, recordingFetch, useReplayStack } from '../helpers/client-replay.ts';
import { SignedInProvider } from '../helpers/oauth-provider.ts';
import { toolJson } from '../tools/helpers.ts';

const REDIRECT = 'http://127.0.0.1:47616/callback';

const r = useReplayStack();

const v2Provider = (method: 'none' | 'client_secret_basic') =>
  new SignedInProvider(
    REDIRECT,
    { client_name: 'MCP SDK v2 client', redirect_uris: [REDIRECT], token_endpoint_auth_method: method },
    () => r.browserSession(),
  );

async function whoami(provider: SignedInProvider, serverUrl: URL) {
  const transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  const client = new Client({ name: 'sdk-v2', version: '1.0.0' });
  await client.connect(transport);
  try {
    return toolJson(await client.callTool({ name: 'whoami', arguments: {} }));
  } finally {
    await client.close();
  }
}

describe('MCP TypeScript SDK v2 client', () => {
  for (const method of ['none', 'client_secret_basic'] as const) {
    it(`signs in as a ${method === 'none' ? 'public' : 'confidential (client_secret_basic)'} client, calls whoami, refreshes and calls whoami again`, async () => {
      const serverUrl = new URL(r.serverUrl());
      const seen: RecordedRequest[] = [];
      const fetchFn = recordingFetch(seen);
      const provider = v2Provider(method);
      expect(await auth(provider, { serverUrl, fetchFn })).toBe('REDIRECT');
      expect(seen.map((s) => `${s.method} ${s.url}`)).toContain(`POST ${r.issuer}/oauth/register`);
      expect(
        (provider.info as { token_endpoint_auth_method?: string }).token_endpoint_auth_method ?? 'none',
      ).toBe(method);
      const code = provider.callback!.searchParams.get('code')!;
      const iss = provider.callback!.searchParams.get('iss') ?? undefined;
      expect(await auth(provider, { serverUrl, authorizationCode: code, iss, fetchFn })).toBe('AUTHORIZED');
      const exchange = seen.find((s) => s.body?.get('grant_type') === 'authorization_code')!;
      if (method === 'client_secret_basic') {
        expect(exchange.headers.get('authorization')).toMatch(/^Basic /);
        expect(exchange.body!.has('client_secret')).toBe(false);
      }
      const clientId = provider.info!.client_id;
      expect(await whoami(provider, serverUrl)).toMatchObject({ email: r.user.email, client_id: clientId });

      const before = provider.tokens()!;
      expect(await auth(provider, { serverUrl, fetchFn })).toBe('AUTHORIZED');
      const refresh = seen.find((s) => s.body?.get('grant_type') === 'refresh_token');
      expect(refresh?.body?.get('resource')).toBe(serverUrl.href);
      expect(provider.tokens()!.access_token).not.toBe(before.access_token);
      expect(await whoami(provider, serverUrl)).toMatchObject({ email: r.user.email, client_id: clientId });
    });
  }
});
