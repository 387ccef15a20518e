// The platform issuer as the benchmarks need it: an RS256 key whose key set is served from here (the gateway
// fetches it once; never on the measured path) and one access token per benchmark user, valid for an hour.
import { generateKeyPairSync, type KeyObject, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, SignJWT } from 'jose';

export interface BenchIssuer {
  /** `http://127.0.0.1:<port>`: the issuer, and its key set at any path. */
  issuer: string;
  /** Token i is for `bench-user-<i>` / `bench-<i>@example.com`, scope `openid email mcp:<service>`. */
  tokens: string[];
  /** With `jkts`: token i bound (`cnf.jkt`) to DPoP key i, otherwise as `tokens[i]`. */
  boundTokens: string[];
  publicKey: KeyObject;
  close(): void;
}

export async function startBenchIssuer(o: {
  audience: string;
  service: string;
  users: number;
  /** DPoP key thumbprints, one per user: `boundTokens` carry them as `cnf.jkt`. */
  jkts?: readonly string[];
}): Promise<BenchIssuer> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = `bench-${randomUUID()}`;
  const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' }] });
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(jwks);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const now = Math.floor(Date.now() / 1000);
  const mint = (i: number, extra: Record<string, unknown> = {}) =>
    new SignJWT({
      iss: issuer,
      aud: o.audience,
      sub: `bench-user-${i}`,
      email: `bench-${i}@example.com`,
      scope: `openid email mcp:${o.service}`,
      client_id: 'platform-cli',
      jti: randomUUID(),
      iat: now,
      exp: now + 3600,
      ...extra,
    })
      .setProtectedHeader({ alg: 'RS256', kid, typ: 'at+jwt' })
      .sign(privateKey);
  const users = Array.from({ length: o.users }, (_, i) => i);
  const tokens = await Promise.all(users.map((i) => mint(i)));
  const boundTokens = o.jkts
    ? await Promise.all(users.map((i) => mint(i, { cnf: { jkt: o.jkts![i] } })))
    : [];
  return { issuer, tokens, boundTokens, publicKey, close: () => server.close() };
}
