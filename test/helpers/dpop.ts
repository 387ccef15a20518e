// A DPoP client's key (RFC 9449): proofs for any method and URL, its thumbprint, and the token requests of the
// platform's IdP made with a proof. Shared by the IdP, gateway and CLI DPoP tests.
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { accessTokenHash, jwkThumbprint } from '../../lib/dpop/index.ts';
import { CLI, obtainCode, postForm } from './oauth.ts';

export interface ProofOptions {
  /** The access token the proof accompanies (sets ath). */
  accessToken?: string;
  nonce?: string;
  /** Seconds since the epoch; default now. */
  iat?: number;
  jti?: string;
}

export interface DpopKey {
  jwk: JWK;
  jkt: string;
  proof(method: string, url: string, o?: ProofOptions): Promise<string>;
}

export async function newDpopKey(alg: 'ES256' | 'EdDSA' = 'ES256'): Promise<DpopKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  return {
    jwk,
    jkt: jwkThumbprint(jwk),
    proof: (method, url, o = {}) =>
      new SignJWT({
        htm: method,
        htu: url,
        jti: o.jti ?? crypto.randomUUID(),
        iat: o.iat ?? Math.floor(Date.now() / 1000),
        ...(o.accessToken !== undefined ? { ath: accessTokenHash(o.accessToken) } : {}),
        ...(o.nonce !== undefined ? { nonce: o.nonce } : {}),
      })
        .setProtectedHeader({ alg, typ: 'dpop+jwt', jwk })
        .sign(privateKey),
  };
}

/** POST to the token endpoint with `DPoP: proof` (when a key or a ready proof is given). */
export async function dpopTokenRequest(
  issuer: string,
  form: Record<string, string | undefined>,
  proof: DpopKey | string | undefined,
  o: ProofOptions = {},
) {
  const url = `${issuer}/oauth/token`;
  const value = typeof proof === 'string' ? proof : await proof?.proof('POST', url, o);
  return postForm(url, form, value ? { dpop: value } : {});
}

export interface DpopTokens {
  access_token: string;
  refresh_token: string;
  token_type: string;
  scope: string;
}

/** A full sign-in whose code exchange carries a proof by `key`: DPoP-bound tokens for a seeded user. */
export async function dpopSignIn(
  issuer: string,
  sessionToken: string,
  key: DpopKey,
  params?: Record<string, string | undefined>,
): Promise<DpopTokens> {
  const c = await obtainCode({ issuer, sessionToken, params });
  const r = await dpopTokenRequest(
    issuer,
    {
      grant_type: 'authorization_code',
      code: c.code,
      code_verifier: c.verifier,
      redirect_uri: c.redirectUri,
      client_id: c.clientId ?? CLI,
    },
    key,
  );
  if (r.status !== 200) throw new Error(`DPoP token exchange failed: ${r.status} ${r.text}`);
  return r.json as unknown as DpopTokens;
}

/** The payload of a JWT, unverified (tests read what the IdP issued). */
export const jwtPayload = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
