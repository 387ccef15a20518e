import {
  auth,
  Client,
  type OAuthClientMetadata,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { InMemoryOAuthProvider } from '../helpers/oauth-provider.ts';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from '../helpers/tls.ts';
import { toolJson } from './helpers.ts';
import { type Stack, startStack } from './stack.ts';

const COOKIE = 'authjs.session-token';
const REDIRECT = 'http://127.0.0.1:47614/callback';

let ca: TestCa;
let docs: TestHttpsServer;
let stack: Stack;
let user: SeededUser;
let clientId: string;

beforeAll(async () => {
  ca = await createTestCa();
  docs = await startHttpsServer(ca, (req, res) => {
    if (req.url !== '/mcp/client-metadata.json') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' });
    res.end(
      JSON.stringify({
        client_id: clientId,
        client_name: 'CIMD Assistant',
        client_uri: `https://localhost:${docs.port}/`,
        redirect_uris: [REDIRECT],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      }),
    );
  });
  clientId = `https://localhost:${docs.port}/mcp/client-metadata.json`;
  stack = await startStack({
    idpEnv: { PLATFORM_CIMD_ALLOWED_HOSTS: `localhost:${docs.port}`, PLATFORM_CIMD_CA_FILE: ca.caFile },
  });
  user = await seedUser(stack.db.pool);
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  await docs?.close();
  await ca?.cleanup();
});

/** The SDK's provider contract, in memory; the "browser" is a fetch carrying the user's web session. */
class MetadataDocumentProvider extends InMemoryOAuthProvider {
  readonly redirectUrl = REDIRECT;
  readonly clientMetadataUrl: string;
  consentPage = '';
  callback: URL | undefined;

  constructor(url: string) {
    super();
    this.clientMetadataUrl = url;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'CIMD Assistant', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' };
  }
  async redirectToAuthorization(url: URL) {
    const visit = await this.visit(url, { cookieName: COOKIE, sessionToken: user.sessionToken });
    this.consentPage = visit.consentPage ?? '';
    this.callback = visit.callback;
  }
}

it("the SDK v2 client's auth() signs in with its metadata document and calls whoami through the gateway", async () => {
  const serverUrl = new URL(`${stack.baseUrl}/platform/mcp`);
  const seen: string[] = [];
  const recordingFetch = (url: string | URL, init?: RequestInit) => {
    seen.push(`${init?.method ?? 'GET'} ${new URL(url.toString()).href}`);
    return fetch(url, init);
  };
  const provider = new MetadataDocumentProvider(clientId);

  expect(await auth(provider, { serverUrl, fetchFn: recordingFetch })).toBe('REDIRECT');
  const issuer = stack.idp.issuer;
  // The SDK took the document URL as its client_id instead of registering.
  expect(seen).not.toContain(`POST ${issuer}/oauth/register`);
  expect(provider.info?.client_id).toBe(clientId);
  // The IdP fetched the document (pinned to the address localhost resolved to, trusted through the test CA).
  expect(docs.requests()).toBeGreaterThanOrEqual(1);
  // The consent page names the client and the host publishing its document.
  expect(provider.consentPage).toContain('CIMD Assistant');
  expect(provider.consentPage).toContain(
    `Its description is published at <span class="host">localhost:${docs.port}`,
  );

  const code = provider.callback!.searchParams.get('code')!;
  const iss = provider.callback!.searchParams.get('iss') ?? undefined;
  expect(await auth(provider, { serverUrl, authorizationCode: code, iss, fetchFn: recordingFetch })).toBe(
    'AUTHORIZED',
  );
  expect(seen).toContain(`POST ${issuer}/oauth/token`);

  const transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  const client = new Client({ name: 'cimd-interop', version: '1.0.0' });
  await client.connect(transport);
  try {
    const me = toolJson(await client.callTool({ name: 'whoami', arguments: {} }));
    expect(me).toMatchObject({ email: user.email, sub: user.sub, issuer: 'platform', client_id: clientId });
  } finally {
    await client.close();
  }

  // The issuance audit carries the document URL as the client; administration sees a metadata client.
  const audit = await stack.db.pool.query(
    'SELECT client_id, grant_type FROM platform.issuance_audit WHERE email = $1',
    [user.email],
  );
  expect(audit.rows).toEqual([{ client_id: clientId, grant_type: 'authorization_code' }]);
  const row = await stack.db.pool.query(
    'SELECT type, name FROM platform.oauth_clients WHERE client_id = $1',
    [clientId],
  );
  expect(row.rows).toEqual([{ type: 'metadata', name: 'CIMD Assistant' }]);
});
