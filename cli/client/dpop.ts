import type { webcrypto } from 'node:crypto';
import { DpopSession } from '@modelcontextprotocol/client';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import * as oidc from 'openid-client';

type CryptoKey = webcrypto.CryptoKey;

/** The algorithms the CLI signs proofs with, in order of preference. */
export const DPOP_ALGORITHMS = ['ES256', 'EdDSA'] as const;
export type DpopAlgorithm = (typeof DPOP_ALGORITHMS)[number];

/** The stored form of a login's proof key (inside the 0600 credentials file): its algorithm and private JWK. */
export interface StoredDpopKey {
  alg: DpopAlgorithm;
  jwk: JWK;
}

/** A proof key ready to sign: for openid-client's token requests, the MCP SDK's fetch wrapper, and the CLI's own. */
export interface DpopKey {
  stored: StoredDpopKey;
  /** RFC 7638 thumbprint: the `cnf.jkt` of the tokens bound to this key, and `dpop_jkt` on authorize. */
  thumbprint: string;
  keyPair: { privateKey: CryptoKey; publicKey: CryptoKey };
  /** Signs proofs and remembers each origin's `DPoP-Nonce` (MCP SDK v2). */
  session: DpopSession;
}

/** The algorithm this CLI uses with an issuer, from its `dpop_signing_alg_values_supported`; none: no DPoP. */
export function pickAlgorithm(supported: unknown): DpopAlgorithm | undefined {
  if (!Array.isArray(supported)) return undefined;
  return DPOP_ALGORITHMS.find((alg) => supported.includes(alg));
}

/** A new key for one login. */
export async function createDpopKey(alg: DpopAlgorithm): Promise<DpopKey> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  return loadDpopKey({ alg, jwk: await exportJWK(privateKey) });
}

export async function loadDpopKey(stored: StoredDpopKey): Promise<DpopKey> {
  const { d: _d, ...publicJwk } = stored.jwk;
  const privateKey = (await importJWK(stored.jwk, stored.alg)) as CryptoKey;
  const publicKey = (await importJWK(publicJwk, stored.alg)) as CryptoKey;
  const thumbprint = await calculateJwkThumbprint(publicJwk, 'sha256');
  const session = await DpopSession.create({
    keyPair: { privateKey, publicKey, publicJwk, thumbprint, alg: stored.alg },
  });
  return { stored, thumbprint, keyPair: { privateKey, publicKey }, session };
}

export function isStoredDpopKey(v: unknown): v is StoredDpopKey {
  if (typeof v !== 'object' || v === null) return false;
  const k = v as Record<string, unknown>;
  return (
    DPOP_ALGORITHMS.includes(k.alg as DpopAlgorithm) &&
    typeof k.jwk === 'object' &&
    k.jwk !== null &&
    typeof (k.jwk as JWK).d === 'string'
  );
}

/** openid-client's DPoP handle for token requests (it signs the proof and retries once on `use_dpop_nonce`). */
export function tokenRequestOptions(server: oidc.Configuration, key: DpopKey | undefined): oidc.DPoPOptions {
  return key ? { DPoP: oidc.getDPoPHandle(server, key.keyPair) } : {};
}

/**
 * A fetch for the issuer's other endpoints (revocation) that carries a proof of `key` without an access token,
 * and answers an `use_dpop_nonce` refusal by signing again once with the nonce it brought.
 */
export function proofFetch(key: DpopKey): oidc.CustomFetch {
  return async (url, options) => {
    const send = async () => {
      const headers = new Headers(options.headers);
      headers.set('dpop', await key.session.buildProof({ htm: options.method, htu: url }));
      return fetch(url, { ...options, headers } as RequestInit);
    };
    let res = await send();
    if (res.status === 400 || res.status === 401) {
      const error = await res
        .clone()
        .json()
        .then((b) => (b as { error?: unknown } | null)?.error)
        .catch(() => undefined);
      if (error === 'use_dpop_nonce' && res.headers.has('dpop-nonce')) {
        key.session.observeNonce(res, url);
        res = await send();
      }
    }
    key.session.observeNonce(res, url);
    return res;
  };
}

/** The `cnf.jkt` claim of a JWT access token, if it has one (an opaque or unbound token has none). */
export function boundThumbprint(token: string): string | undefined {
  try {
    const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8'));
    const jkt = claims?.cnf?.jkt;
    return typeof jkt === 'string' ? jkt : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The key a new login binds its tokens to: a fresh one, unless `--no-dpop` or the issuer does not offer DPoP
 * (its discovery names no algorithm this CLI signs with; said on stderr, and the login gets bearer tokens).
 */
export async function keyForLogin(
  wanted: boolean,
  metadata: { issuer: string; dpop_signing_alg_values_supported?: unknown },
  warn: (line: string) => void,
): Promise<DpopKey | undefined> {
  if (!wanted) return undefined;
  const alg = pickAlgorithm(metadata.dpop_signing_alg_values_supported);
  if (alg) return createDpopKey(alg);
  warn(
    `warning: ${metadata.issuer} does not offer DPoP; the tokens are bearer tokens (usable by whoever holds them)`,
  );
  return undefined;
}
