// A DPoP client for tests (RFC 9449), on the MCP SDK v2's DpopSession: a key that can be handed to another
// process (its private JWK), token requests with a proof (a `use_dpop_nonce` refusal answered once with the
// nonce, as clients do), and resource requests as `Authorization: DPoP` with a proof bound to the token.
import type { webcrypto } from 'node:crypto';
import { DpopSession, withDpop } from '@modelcontextprotocol/client';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';

export interface TestDpopKey {
  session: DpopSession;
  /** The private JWK with `alg`: what another process needs to sign with the same key. */
  jwk: JWK;
  thumbprint: string;
}

export async function newDpopKey(alg: 'ES256' | 'EdDSA' = 'ES256'): Promise<TestDpopKey> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  return dpopKeyFrom({ ...(await exportJWK(privateKey)), alg });
}

export async function dpopKeyFrom(jwk: JWK): Promise<TestDpopKey> {
  const alg = jwk.alg as 'ES256' | 'EdDSA';
  const { d: _d, alg: _alg, ...publicJwk } = jwk;
  const thumbprint = await calculateJwkThumbprint(publicJwk, 'sha256');
  const session = await DpopSession.create({
    keyPair: {
      privateKey: (await importJWK(jwk, alg)) as webcrypto.CryptoKey,
      publicKey: (await importJWK(publicJwk, alg)) as webcrypto.CryptoKey,
      publicJwk,
      thumbprint,
      alg,
    },
  });
  return { session, jwk, thumbprint };
}

/** The key `platform login` stored with its credentials (`dpop_key`), to sign as the CLI would. */
export function keyOfStoredLogin(creds: {
  dpop_key?: { alg: string; jwk: JWK };
}): Promise<TestDpopKey> | undefined {
  return creds.dpop_key ? dpopKeyFrom({ ...creds.dpop_key.jwk, alg: creds.dpop_key.alg }) : undefined;
}

export interface FormAnswer {
  status: number;
  json: Record<string, unknown>;
  text: string;
}

/** POST a form to a token endpoint with a fresh proof by `key` (none when `key` is undefined). */
export async function postFormWithProof(
  url: string,
  form: Record<string, string>,
  key: TestDpopKey | undefined,
): Promise<FormAnswer> {
  const send = async () => {
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
    if (key) headers.dpop = await key.session.buildProof({ htm: 'POST', htu: url });
    return fetch(url, { method: 'POST', headers, body: new URLSearchParams(form) });
  };
  let res = await send();
  let text = await res.text();
  if (key && res.status === 400 && res.headers.has('dpop-nonce') && text.includes('use_dpop_nonce')) {
    key.session.observeNonce(res, url);
    res = await send();
    text = await res.text();
  }
  key?.session.observeNonce(res, url);
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return { status: res.status, json, text };
}

/** A fetch presenting `token` as `Authorization: DPoP` with a proof by `session`'s key per request. */
export function dpopFetch(session: DpopSession, token: () => string): typeof fetch {
  return withDpop(session, token)(fetch) as typeof fetch;
}

/** The `cnf.jkt` of a JWT access token. */
export function jktOf(accessToken: string): string | undefined {
  const claims = JSON.parse(Buffer.from(accessToken.split('.')[1] ?? '', 'base64url').toString('utf8'));
  return claims?.cnf?.jkt;
}
