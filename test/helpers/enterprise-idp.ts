// A stand-in enterprise IdP for the enterprise-managed authorization tests: its key set served over HTTP on
// loopback (GET /jwks, counted), an RFC 8693 token exchange (POST /oauth2/token) that turns a known ID token into
// an ID-JAG the way Okta's Cross App Access does, and a signer for hand-made (forged, expired, misdirected) grants.
import { createServer, type Server } from 'node:http';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';

export const ID_JAG_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id-jag';

export interface IdJagClaims {
  sub?: string;
  email?: string;
  aud: string;
  client_id: string;
  resource?: string | string[];
  scope?: string;
  jti?: string;
  /** Seconds since the epoch. */
  iat?: number;
  exp?: number;
  /** Another issuer name (a grant claiming to come from elsewhere). */
  iss?: string;
  typ?: string;
}

export interface EnterpriseIdp {
  issuer: string;
  jwksUri: string;
  tokenEndpoint: string;
  /** GET /jwks requests answered so far. */
  jwksFetches(): number;
  /** An ID-JAG signed with this IdP's key (or a key it does not publish, `foreignKey`). */
  sign(claims: IdJagClaims, o?: { foreignKey?: boolean }): Promise<string>;
  /** The ID token the token exchange accepts for a user (the client's single sign-on result). */
  idTokenFor(email: string): string;
  /** The policy's answer: the scope it grants (default: the scope asked for). */
  policy: { scope?: string };
  close(): Promise<void>;
}

export async function startEnterpriseIdp(): Promise<EnterpriseIdp> {
  const key = await generateKeyPair('RS256', { extractable: true });
  const foreign = await generateKeyPair('RS256', { extractable: true });
  const jwk: JWK = { ...(await exportJWK(key.publicKey)), kid: 'ent-1', alg: 'RS256', use: 'sig' };
  const idTokens = new Map<string, string>();
  let fetches = 0;
  const policy: EnterpriseIdp['policy'] = {};
  let issuer = '';

  const sign: EnterpriseIdp['sign'] = (c, o = {}) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({
      client_id: c.client_id,
      ...(c.email !== undefined ? { email: c.email } : {}),
      ...(c.resource !== undefined ? { resource: c.resource } : {}),
      ...(c.scope !== undefined ? { scope: c.scope } : {}),
    })
      .setProtectedHeader({
        alg: 'RS256',
        kid: o.foreignKey ? 'ent-unknown' : 'ent-1',
        typ: c.typ ?? 'oauth-id-jag+jwt',
      })
      .setIssuer(c.iss ?? issuer)
      .setSubject(c.sub ?? `00u${crypto.randomUUID().slice(0, 8)}`)
      .setAudience(c.aud)
      .setJti(c.jti ?? crypto.randomUUID())
      .setIssuedAt(c.iat ?? now)
      .setExpirationTime(c.exp ?? now + 300)
      .sign(o.foreignKey ? foreign.privateKey : key.privateKey);
  };

  const server: Server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/jwks') {
      fetches++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
      return;
    }
    if (req.method === 'POST' && req.url === '/oauth2/token') {
      let body = '';
      req.on('data', (d) => {
        body += d;
      });
      req.on('end', async () => {
        const f = new URLSearchParams(body);
        const email = idTokens.get(f.get('subject_token') ?? '');
        const fail = (error: string, error_description: string) =>
          res
            .writeHead(400, { 'content-type': 'application/json' })
            .end(JSON.stringify({ error, error_description }));
        if (f.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:token-exchange')
          return fail('unsupported_grant_type', 'token exchange only');
        if (f.get('requested_token_type') !== ID_JAG_TOKEN_TYPE)
          return fail('invalid_request', 'id-jag only');
        if (!email) return fail('invalid_grant', 'unknown ID token');
        const scope = policy.scope ?? f.get('scope') ?? undefined;
        const grant = await sign({
          email,
          aud: f.get('audience') ?? '',
          client_id: f.get('client_id') ?? '',
          resource: f.get('resource') ?? undefined,
          scope,
        });
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(
          JSON.stringify({
            issued_token_type: ID_JAG_TOKEN_TYPE,
            access_token: grant,
            token_type: 'N_A',
            ...(scope ? { scope } : {}),
            expires_in: 300,
          }),
        );
      });
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  issuer = origin;
  return {
    issuer,
    jwksUri: `${origin}/jwks`,
    tokenEndpoint: `${origin}/oauth2/token`,
    jwksFetches: () => fetches,
    sign,
    idTokenFor(email) {
      const t = `idt-${crypto.randomUUID()}`;
      idTokens.set(t, email);
      return t;
    },
    policy,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
