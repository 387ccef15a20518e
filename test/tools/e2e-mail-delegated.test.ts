// Mail as the user from end to end, every part a real process: a user signed in at `platform idp` calls send_mail
// with the MCP SDK v2 client through `platform gateway` (MAIL_UPSTREAM_CONNECTION=m365) to `platform tool mail`
// (the same connection, no app-only Graph credentials), and the message reaches the Graph stand-in's
// `/me/sendMail` with the user's delegated token. The IdP's exchange for connections is a stand-in answering as
// docs/gateway.md says (it verifies the subject token against the real IdP's key set); a user who has not
// connected gets −32042 with the connect URL, and mail is not contacted.
import {
  Client,
  StreamableHTTPClientTransport,
  UrlElicitationRequiredError,
} from '@modelcontextprotocol/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  GATEWAY_CLIENT_SECRET,
  startTokenEndpoint,
  type TokenEndpoint,
} from '../gateway/upstream-helpers.ts';
import { seedUser } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { GraphStandIn } from './graph-stand-in.ts';
import { type Stack, startStack } from './stack.ts';

let stack: Stack;
let idp: TokenEndpoint;
let graph: GraphStandIn;

beforeAll(async () => {
  graph = new GraphStandIn();
  await graph.start();
  // The gateway must name the exchange endpoint before the IdP (whose keys it checks) has started.
  idp = await startTokenEndpoint(
    () => ({ issuer: stack.idp.issuer, jwksUrl: `${stack.idp.issuer}/.well-known/jwks.json` }),
    'https://idp.example.test',
  );
  stack = await startStack({
    gatewayEnv: {
      MAIL_UPSTREAM_CONNECTION: 'm365',
      GATEWAY_CLIENT_SECRET,
      GATEWAY_TOKEN_URL: `${idp.url}/oauth/token`,
    },
    toolEnv: { mail: { MAIL_UPSTREAM_CONNECTION: 'm365', GRAPH_BASE_URL: `${graph.url}/v1.0` } },
  });
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  await idp?.close();
  await graph?.close();
});

async function mailClient(token: string): Promise<Client> {
  const client = new Client({ name: 'e2e-mail-delegated', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${stack.baseUrl}/mail/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

it("send_mail reaches Graph's /me/sendMail with the user's delegated token; before connecting, −32042", async () => {
  const user = await seedUser(stack.db.pool);
  const { access_token: token } = await signIn(stack.idp.issuer, user.sessionToken, {
    scope: 'openid email mcp:mail',
  });
  const send = (c: Client) =>
    c.callTool({
      name: 'send_mail',
      arguments: { to: 'colleague@example.com', subject: 'Hi', body: 'Hello' },
    });

  const before = graph.calls.length;
  const err = await mailClient(token).then(send, (e: unknown) => e);
  expect(err).toBeInstanceOf(UrlElicitationRequiredError);
  expect((err as UrlElicitationRequiredError).elicitations[0]).toMatchObject({
    mode: 'url',
    url: 'https://idp.example.test/connections/m365',
  });
  expect(graph.calls.length).toBe(before);

  const delegated = `delegated-${user.sub}`;
  graph.delegated.add(delegated);
  idp.connect(user.sub, 'm365', delegated);
  const client = await mailClient(token);
  const result = await send(client);
  await client.close();
  expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
  expect(result.structuredContent).toMatchObject({ delivery: 'graph', status: 'sent', delegated: true });
  expect(graph.calls.slice(before)).toMatchObject([
    { path: '/v1.0/me/sendMail', authorization: `Bearer ${delegated}` },
  ]);
  expect(graph.tokenRequests).toBe(0);
  expect(idp.exchanges.filter((e) => e.sub === user.sub).map((e) => e.subjectToken)).toContain(token);
});
