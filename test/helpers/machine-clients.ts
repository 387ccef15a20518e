// A machine client's signing key (private_key_jwt, RFC 7523): its public JWK Set (for `platform admin clients add
// --jwks-file`), its private JWK (for the SDK v2 PrivateKeyJwtProvider) and client_credentials requests signed
// with it. Shared by the machine-client tests.
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { postForm } from './oauth.ts';

export const JWT_BEARER_CLIENT = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

export interface MachineKey {
  privateJwk: JWK;
  jwks: { keys: JWK[] };
  /** The public key set written to a temporary file. */
  jwksFile: string;
  assertion(clientId: string, aud: string, o?: { jti?: string }): Promise<string>;
  /** POST /oauth/token grant_type=client_credentials with a fresh assertion (or the one given). */
  token(
    issuer: string,
    clientId: string,
    form?: Record<string, string | undefined>,
    headers?: Record<string, string>,
  ): ReturnType<typeof postForm>;
}

export async function newMachineKey(): Promise<MachineKey> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const pub: JWK = { ...(await exportJWK(publicKey)), alg: 'ES256', use: 'sig' };
  const jwksFile = join(tmpdir(), `machine-jwks-${crypto.randomUUID()}.json`);
  await writeFile(jwksFile, JSON.stringify({ keys: [pub] }));
  const assertion = (clientId: string, aud: string, o: { jti?: string } = {}) =>
    new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', typ: 'JWT' })
      .setIssuer(clientId)
      .setSubject(clientId)
      .setAudience(aud)
      .setJti(o.jti ?? crypto.randomUUID())
      .setIssuedAt()
      .setExpirationTime('2m')
      .sign(privateKey);
  return {
    privateJwk: { ...(await exportJWK(privateKey)), alg: 'ES256' },
    jwks: { keys: [pub] },
    jwksFile,
    assertion,
    async token(issuer, clientId, form = {}, headers = {}) {
      return postForm(
        `${issuer}/oauth/token`,
        {
          grant_type: 'client_credentials',
          client_assertion_type: JWT_BEARER_CLIENT,
          client_assertion: await assertion(clientId, issuer),
          ...form,
        },
        headers,
      );
    },
  };
}

/** tools/list at an MCP URL through the gateway with a bearer: 200 while the token is live, 401 once it is cut. */
export async function gatewayStatus(mcpUrl: string, token: string): Promise<number> {
  const res = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  await res.body?.cancel();
  return res.status;
}
