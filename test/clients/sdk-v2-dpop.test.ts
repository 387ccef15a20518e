// The MCP TypeScript SDK v2 client with DPoP (RFC 9449; `OAuthClientProvider.dpop()` returning a
// `DpopSession`), for real against the IdP, gateway and tool servers: auth() gets a DPoP-bound token
// (`token_type: DPoP`, `cnf.jkt` = the session's key), the transports present it as `Authorization: DPoP` with
// a fresh proof per request, a refresh keeps it bound, and what a thief does with the stolen tokens fails.
import { auth, Client, DpopSession, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { call, errorOf } from '../gateway/helpers.ts';
import { type RecordedRequest, recordingFetch, useReplayStack } from '../helpers/client-replay.ts';
import { dpopFetch, jktOf, newDpopKey, postFormWithProof } from '../helpers/dpop-client.ts';
import { SignedInProvider } from '../helpers/oauth-provider.ts';
import { toolJson } from '../tools/helpers.ts';

const REDIRECT = 'http://127.0.0.1:47617/callback';

const r = useReplayStack();

class DpopProvider extends SignedInProvider {
  readonly session: Promise<DpopSession>;
  constructor(alg: 'ES256' | 'EdDSA') {
    super(
      REDIRECT,
      {
        client_name: 'MCP SDK v2 client (DPoP)',
        redirect_uris: [REDIRECT],
        token_endpoint_auth_method: 'none',
      },
      () => r.browserSession(),
    );
    this.session = DpopSession.create({ alg });
  }
  dpop() {
    return this.session;
  }
}

async function whoami(provider: DpopProvider, serverUrl: URL, seen?: RecordedRequest[]) {
  const transport = new StreamableHTTPClientTransport(serverUrl, {
    authProvider: provider,
    ...(seen ? { fetch: recordingFetch(seen) } : {}),
  });
  const client = new Client({ name: 'sdk-v2-dpop', version: '1.0.0' });
  await client.connect(transport);
  try {
    return toolJson(await client.callTool({ name: 'whoami', arguments: {} }));
  } finally {
    await client.close();
  }
}

/** tools/list through the gateway with a fetch of the test's choosing: the status and the gateway's reason. */
async function listTools(fetchFn: typeof fetch, service = 'platform') {
  const res = await fetchFn(r.serverUrl(service), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  await res.body?.cancel();
  return { status: res.status, www: res.headers.get('www-authenticate') ?? '' };
}

describe('MCP TypeScript SDK v2 client with dpop()', () => {
  for (const alg of ['ES256', 'EdDSA'] as const) {
    it(`gets a DPoP-bound token (${alg}), calls whoami through the gateway with proofs, refreshes bound, calls again`, async () => {
      const serverUrl = new URL(r.serverUrl());
      const seen: RecordedRequest[] = [];
      const fetchFn = recordingFetch(seen);
      const provider = new DpopProvider(alg);
      const session = await provider.session;
      expect(await auth(provider, { serverUrl, fetchFn })).toBe('REDIRECT');
      const code = provider.callback!.searchParams.get('code')!;
      const iss = provider.callback!.searchParams.get('iss') ?? undefined;
      expect(await auth(provider, { serverUrl, authorizationCode: code, iss, fetchFn })).toBe('AUTHORIZED');

      const exchange = seen.find((s) => s.body?.get('grant_type') === 'authorization_code')!;
      expect(exchange.headers.get('dpop')).toBeTruthy();
      const tokens = provider.tokens()!;
      expect(tokens.token_type.toLowerCase()).toBe('dpop');
      expect(jktOf(tokens.access_token)).toBe(session.thumbprint);

      const calls: RecordedRequest[] = [];
      const clientId = provider.info!.client_id;
      expect(await whoami(provider, serverUrl, calls)).toMatchObject({
        email: r.user.email,
        client_id: clientId,
      });
      // Every request to the gateway carried the DPoP scheme and its own proof.
      const proofs = calls.map((c) => c.headers.get('dpop'));
      expect(calls.every((c) => c.headers.get('authorization')?.startsWith('DPoP '))).toBe(true);
      expect(new Set(proofs).size).toBe(proofs.length);

      expect(await auth(provider, { serverUrl, fetchFn })).toBe('AUTHORIZED');
      const refresh = seen.find((s) => s.body?.get('grant_type') === 'refresh_token')!;
      expect(refresh.headers.get('dpop')).toBeTruthy();
      expect(provider.tokens()!.access_token).not.toBe(tokens.access_token);
      expect(jktOf(provider.tokens()!.access_token)).toBe(session.thumbprint);
      expect(await whoami(provider, serverUrl)).toMatchObject({ email: r.user.email, client_id: clientId });
    });
  }

  it('a stolen DPoP access token is useless to the thief: as Bearer, or with a proof by another key', async () => {
    const serverUrl = new URL(r.serverUrl());
    const provider = new DpopProvider('ES256');
    await auth(provider, { serverUrl });
    const code = provider.callback!.searchParams.get('code')!;
    const iss = provider.callback!.searchParams.get('iss') ?? undefined;
    expect(await auth(provider, { serverUrl, authorizationCode: code, iss })).toBe('AUTHORIZED');
    const stolen = provider.tokens()!.access_token;

    const asBearer = await call(serverUrl.href, {
      method: 'POST',
      token: stolen,
      headers: { accept: 'application/json, text/event-stream' },
    });
    expect(asBearer.status).toBe(401);
    expect(errorOf(asBearer)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'dpop_required' });

    const thief = await newDpopKey();
    const otherKey = await listTools(dpopFetch(thief.session, () => stolen));
    expect(otherKey.status).toBe(401);
    expect(otherKey.www).toMatch(/DPoP /);

    // The holder's own key still works.
    const holder = await listTools(dpopFetch(await provider.session, () => stolen));
    expect(holder.status).toBe(200);
  });

  it('a stolen bound refresh token is useless without the key', async () => {
    const serverUrl = new URL(r.serverUrl());
    const provider = new DpopProvider('ES256');
    await auth(provider, { serverUrl });
    const code = provider.callback!.searchParams.get('code')!;
    const iss = provider.callback!.searchParams.get('iss') ?? undefined;
    expect(await auth(provider, { serverUrl, authorizationCode: code, iss })).toBe('AUTHORIZED');
    const { refresh_token } = provider.tokens()!;
    const form = {
      grant_type: 'refresh_token',
      refresh_token: refresh_token!,
      client_id: provider.info!.client_id,
    };
    const thief = await postFormWithProof(`${r.issuer}/oauth/token`, form, await newDpopKey());
    expect(thief.status).toBe(400);
    expect(thief.json.error).toBe('invalid_grant');
    // The holder refreshes with its key as if nothing happened.
    expect(await auth(provider, { serverUrl })).toBe('AUTHORIZED');
  });
});
