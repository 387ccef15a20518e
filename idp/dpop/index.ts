import type { ServerResponse } from 'node:http';
import {
  DPOP_ALGORITHMS,
  DPOP_JTI_RETENTION_SECONDS,
  DpopNonces,
  DpopProofError,
  type DpopReplayStore,
  verifyDpopProof,
} from '../../lib/dpop/index.ts';
import type { IdpConfig } from '../config.ts';
import { DpopTokenError, OAuthError, TemporarilyUnavailableError } from '../errors.ts';
import type { Exchange } from '../exchange.ts';

/** What the provider accepts a proof signed with (discovery's dpop_signing_alg_values_supported). */
export const IDP_DPOP_ALGORITHMS: readonly string[] = DPOP_ALGORITHMS;

/** The provider's side of DPoP (RFC 9449): proofs at the token endpoint and at its protected routes. */
export interface IdpDpop {
  /** PLATFORM_DPOP_NONCE=on: a fresh `DPoP-Nonce` on the answer (every token answer carries one). */
  offerNonce(res: ServerResponse): void;
  /**
   * The token endpoint's proof (htu the token endpoint, htm POST, no ath): the key's thumbprint, or undefined
   * when the request has no `DPoP` header. 400 `invalid_dpop_proof` / `use_dpop_nonce` otherwise.
   */
  tokenProof(x: Exchange): Promise<string | undefined>;
  /**
   * A protected route (userinfo, admin API): `scheme` as the Authorization header gave it, the token's
   * `cnf.jkt`. DPoP needs a bound token and a proof (htu this URL, ath the token) by its key; a bound token
   * sent as Bearer is refused. 401 `invalid_token` / `invalid_dpop_proof` with a DPoP challenge, or
   * `use_dpop_nonce` with a `DPoP-Nonce` (PLATFORM_DPOP_NONCE=on, as at the token endpoint).
   */
  checkSender(
    x: Exchange,
    o: { scheme: 'Bearer' | 'DPoP'; token: string; jkt: string | undefined },
  ): Promise<void>;
}

/**
 * `store` names where proofs are recorded (`Redis`, `the database`) for the refusal when it cannot be reached: an
 * operator reading the 503 knows what to look at.
 */
export function createIdpDpop(
  config: IdpConfig,
  replay: DpopReplayStore,
  nonceKey: Buffer,
  store = 'Redis',
): IdpDpop {
  const nonces = config.dpopNonce ? new DpopNonces(nonceKey) : undefined;
  const nonceValid = nonces ? (n: string) => nonces.nonceValid(n) : undefined;

  async function firstUse(jti: string, jkt: string): Promise<boolean> {
    try {
      return await replay.firstUse(jti, jkt, DPOP_JTI_RETENTION_SECONDS);
    } catch {
      // Fail closed: a proof whose single use cannot be recorded is not accepted.
      throw new TemporarilyUnavailableError(
        `DPoP proofs cannot be checked right now: ${store} is unreachable; retry shortly`,
      );
    }
  }

  return {
    offerNonce(res) {
      if (nonces) res.setHeader('dpop-nonce', nonces.issueNonce());
    },

    async tokenProof(x) {
      const header = dpopHeader(x);
      if (header === undefined) return undefined;
      let proof: ReturnType<typeof verifyDpopProof>;
      try {
        proof = verifyDpopProof(header, {
          method: x.req.method ?? '',
          url: `${config.issuer}/oauth/token`,
          nonceValid,
          algorithms: IDP_DPOP_ALGORITHMS,
        });
      } catch (err) {
        if (err instanceof DpopProofError) throw new OAuthError(err.reason, err.message);
        throw err;
      }
      if (!(await firstUse(proof.jti, proof.jkt)))
        throw new OAuthError('invalid_dpop_proof', 'the DPoP proof was already used (jti)');
      return proof.jkt;
    },

    async checkSender(x, o) {
      if (o.scheme === 'Bearer') {
        if (o.jkt !== undefined)
          throw new DpopTokenError(
            'invalid_token',
            'the access token is DPoP-bound: send it as DPoP with a proof',
          );
        return;
      }
      if (o.jkt === undefined)
        throw new DpopTokenError('invalid_token', 'the access token is not DPoP-bound: send it as Bearer');
      const header = dpopHeader(x);
      if (header === undefined) throw new DpopTokenError('invalid_dpop_proof', 'a DPoP proof is required');
      let proof: ReturnType<typeof verifyDpopProof>;
      try {
        proof = verifyDpopProof(header, {
          method: x.req.method ?? '',
          url: `${config.issuer}${x.url.pathname}`,
          accessToken: o.token,
          // PLATFORM_DPOP_NONCE applies wherever the provider checks a proof (RFC 9449 §9 at a resource).
          nonceValid,
          algorithms: IDP_DPOP_ALGORITHMS,
        });
      } catch (err) {
        if (err instanceof DpopProofError)
          throw err.reason === 'use_dpop_nonce'
            ? new DpopTokenError('use_dpop_nonce', err.message, nonces?.issueNonce())
            : new DpopTokenError('invalid_dpop_proof', err.message);
        throw err;
      }
      if (proof.jkt !== o.jkt)
        throw new DpopTokenError(
          'invalid_dpop_proof',
          'the DPoP proof is not signed by the key the token is bound to',
        );
      if (!(await firstUse(proof.jti, proof.jkt)))
        throw new DpopTokenError('invalid_dpop_proof', 'the DPoP proof was already used (jti)');
      // A fresh nonce for the client's next proof, as every token answer carries (RFC 9449 §8.2).
      if (nonces) x.res.setHeader('dpop-nonce', nonces.issueNonce());
    },
  };
}

/** The `DPoP` header; several (an array) are joined, which verifyDpopProof refuses. */
function dpopHeader(x: Exchange): string | undefined {
  const h = x.req.headers.dpop;
  return Array.isArray(h) ? h.join(',') : h;
}

const AUTHORIZATION = /^(Bearer|DPoP) ([A-Za-z0-9._~+/-]+=*)$/i;

/** An Authorization header's scheme (Bearer or DPoP, any case) and token; undefined for anything else. */
export function parseAuthorization(header: string): { scheme: 'Bearer' | 'DPoP'; token: string } | undefined {
  const m = AUTHORIZATION.exec(header);
  if (!m) return undefined;
  return { scheme: m[1]!.toLowerCase() === 'dpop' ? 'DPoP' : 'Bearer', token: m[2]! };
}
