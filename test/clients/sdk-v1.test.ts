// The MCP TypeScript SDK v1 client (@modelcontextprotocol/sdk, still inside most apps) runs for real: its
// auth() discovers from the gateway's 401, registers, authorizes (the browser is a fetch carrying the user's
// web session, approving the consent page), exchanges the code, calls whoami through the gateway with its
// transport, refreshes (auth() again with a refresh token held) and calls whoami again.
// Source of its rules: https://github.com/modelcontextprotocol/typescript-sdk/blob/v1.x/src/client/auth.ts
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { type RecordedRequest, recordingFetch, useReplayStack } from '../helpers/client-replay.ts';
import { SignedInProvider } from '../helpers/oauth-provider.ts';
import { toolJson } from '../tools/helpers.ts';

const REDIRECT = 'http://127.0.0.1:47615/callback';

const r = useReplayStack();

const v1Provider = () =>
  new SignedInProvider(
    REDIRECT,
    {
      client_name: 'MCP SDK v1 client',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    },
    () => r.browserSession(),
  );

async function whoami(provider: SignedInProvider, serverUrl: URL) {
  const transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  const client = new Client({ name: 'sdk-v1', version: '1.0.0' });
  await client.connect(transport);
  try {
    return toolJson((await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
}

describe('MCP TypeScript SDK v1 client', () => {
  it('registers, authorizes, exchanges, calls whoami, refreshes and calls whoami again', async () => {
    const serverUrl = new URL(r.serverUrl());
    const seen: RecordedRequest[] = [];
    const fetchFn = recordingFetch(seen);
    const provider = v1Provider();
    expect(await auth(provider, { serverUrl, fetchFn })).toBe('REDIRECT');
    expect(seen.map((s) => `${s.method} ${s.url}`)).toContain(`POST ${r.issuer}/oauth/register`);
    const code = provider.callback!.searchParams.get('code')!;
    expect(await auth(provider, { serverUrl, authorizationCode: code, fetchFn })).toBe('AUTHORIZED');
    const clientId = provider.info!.client_id;
    expect(await whoami(provider, serverUrl)).toMatchObject({ email: r.user.email, client_id: clientId });

    const before = provider.tokens()!;
    expect(await auth(provider, { serverUrl, fetchFn })).toBe('AUTHORIZED');
    const refresh = seen.find((s) => s.body?.get('grant_type') === 'refresh_token');
    expect(refresh?.body?.get('resource')).toBe(serverUrl.href);
    expect(provider.tokens()!.access_token).not.toBe(before.access_token);
    expect(await whoami(provider, serverUrl)).toMatchObject({ email: r.user.email, client_id: clientId });
  });
});
