// A real, independent OAuth authorization server for connection tests: panva's oidc-provider on loopback, with
// PKCE (S256 only), refresh-token rotation, RFC 7009 revocation and RFC 7662 introspection (for a resource server
// of its own: `resourceServer`). Its login and consent steps approve at once as `account` (the upstream user of
// the moment); every token it issues and every request it gets are recorded.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

export interface UpstreamAs {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** A confidential client allowed only to introspect (RFC 7662 at `introspectionEndpoint`): an API of this AS. */
  resourceServer: { clientId: string; clientSecret: string };
  introspectionEndpoint: string;
  /** The upstream user the next sign-in approves as. */
  account: string;
  /** Seconds an access token issued from now on lives. */
  accessTtl: number;
  /** Every access and refresh token issued so far (what must never appear in our logs or answers). */
  issuedTokens: string[];
  /** Token-endpoint successes by grant type. */
  grants: Record<string, number>;
  /** Revocation requests received. */
  revocations: number;
  /** method + path of every request. */
  requests: string[];
  /** When set, token requests wait for it before they are answered (to line up concurrent callers). */
  hold: Promise<void> | undefined;
  close(): Promise<void>;
}

export async function startUpstreamAs(o: { redirectUris: string[] }): Promise<UpstreamAs> {
  const server: Server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = 'platform-connections';
  const clientSecret = randomBytes(24).toString('hex');
  const state: UpstreamAs = {
    issuer,
    clientId,
    clientSecret,
    resourceServer: { clientId: 'upstream-api', clientSecret: randomBytes(24).toString('hex') },
    introspectionEndpoint: `${issuer}/token/introspection`,
    account: 'upstream-alice',
    accessTtl: 3600,
    issuedTokens: [],
    grants: {},
    revocations: 0,
    requests: [],
    hold: undefined,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: o.redirectUris,
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      {
        client_id: state.resourceServer.clientId,
        client_secret: state.resourceServer.clientSecret,
        redirect_uris: [],
        grant_types: [],
        response_types: [],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    scopes: ['openid', 'offline_access', 'repo'],
    features: {
      devInteractions: { enabled: false },
      revocation: { enabled: true },
      // Only the resource server introspects (the connections' client has no business there).
      introspection: {
        enabled: true,
        allowedPolicy: async (_ctx: unknown, client: { clientId: string }) =>
          client.clientId === state.resourceServer.clientId,
      },
    },
    pkce: { required: () => true },
    issueRefreshToken: async () => true,
    rotateRefreshToken: true,
    ttl: {
      AccessToken: () => state.accessTtl,
      RefreshToken: 86_400,
      Grant: 86_400,
      Session: 86_400,
      Interaction: 600,
      AuthorizationCode: 60,
      IdToken: 3600,
    },
    findAccount: async (_ctx: unknown, id: string) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    interactions: { url: (_ctx: unknown, i: { uid: string }) => `/interaction/${i.uid}` },
    cookies: { keys: [randomBytes(16).toString('hex')] },
    // biome-ignore lint/suspicious/noExplicitAny: oidc-provider's configuration type is loose
  } as any);
  provider.on(
    'grant.success',
    (ctx: { oidc: { params: { grant_type?: string } }; body: Record<string, unknown> }) => {
      const type = String(ctx.oidc.params.grant_type);
      state.grants[type] = (state.grants[type] ?? 0) + 1;
      for (const k of ['access_token', 'refresh_token']) {
        const v = ctx.body[k];
        if (typeof v === 'string') state.issuedTokens.push(v);
      }
    },
  );
  const callback = provider.callback();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', issuer).pathname;
    state.requests.push(`${req.method} ${path}`);
    if (req.method === 'POST' && path === '/token/revocation') state.revocations++;
    if (req.url?.startsWith('/interaction/')) {
      void interact(provider, state, req, res).catch((err: Error) => {
        res.writeHead(500).end(err.message);
      });
      return;
    }
    if (req.method === 'POST' && path === '/token' && state.hold) {
      void state.hold.then(() => callback(req, res));
      return;
    }
    callback(req, res);
  });
  return state;
}

/** Login, then consent to everything asked: the user of the moment approves at once. */
async function interact(provider: Provider, state: UpstreamAs, req: IncomingMessage, res: ServerResponse) {
  // biome-ignore lint/suspicious/noExplicitAny: oidc-provider's interaction details are loosely typed
  const details: any = await provider.interactionDetails(req, res);
  if (details.prompt.name === 'login') {
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId: state.account } },
      {
        mergeWithLastSubmission: false,
      },
    );
    return;
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
  const d = details.prompt.details;
  if (d.missingOIDCScope) grant!.addOIDCScope(d.missingOIDCScope.join(' '));
  if (d.missingOIDCClaims) grant!.addOIDCClaims(d.missingOIDCClaims);
  if (d.missingResourceScopes)
    for (const [indicator, scopes] of Object.entries(d.missingResourceScopes as Record<string, string[]>))
      grant!.addResourceScope(indicator, scopes.join(' '));
  const grantId = await grant!.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}
