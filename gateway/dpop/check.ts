import {
  DPOP_JTI_RETENTION_SECONDS,
  type DpopNonces,
  DpopProofError,
  type DpopReplayStore,
  verifyDpopProof,
} from '../../lib/dpop/index.ts';
import type { PresentedToken } from '../auth/bearer.ts';
import type { VerifiedToken } from '../auth/verified-token.ts';
import { InvalidTokenError } from '../errors.ts';

/** The proof algorithms the gateway accepts (asymmetric only); named in every 401's `DPoP algs="…"`. */
export const GATEWAY_DPOP_ALGORITHMS = ['ES256', 'ES384', 'EdDSA', 'Ed25519', 'PS256', 'RS256'] as const;

/**
 * 401 INVALID_TOKEN for a DPoP request whose proof is missing or refused: `dpopError` goes into the DPoP
 * challenge (`invalid_dpop_proof`, or `use_dpop_nonce` with a fresh `DPoP-Nonce`, RFC 9449 §7.1, §9).
 */
export class DpopRefusedError extends InvalidTokenError {
  readonly dpopError: 'invalid_dpop_proof' | 'use_dpop_nonce';
  /** Sent as `DPoP-Nonce` (use_dpop_nonce). */
  readonly nonce: string | undefined;
  constructor(dpopError: 'invalid_dpop_proof' | 'use_dpop_nonce', message: string, nonce?: string) {
    super(dpopError, message);
    this.dpopError = dpopError;
    this.nonce = nonce;
  }
}

export interface DpopCheckDeps {
  /** PUBLIC_BASE_URL without a trailing slash: `htu` must be it followed by the request's path. */
  publicBaseUrl: string;
  replay: DpopReplayStore;
  /** GATEWAY_DPOP_NONCE=on: proofs must carry a nonce of ours (current or previous bucket). */
  nonces: DpopNonces | undefined;
}

export interface DpopRequest {
  presented: PresentedToken;
  /** The `DPoP` header (the first, when repeated). */
  proof: string | undefined;
  proofRepeated: boolean;
  method: string;
  /** The request's path, without the query. */
  path: string;
}

/**
 * The DPoP rules of one request, after the token's own checks. A refusal found locally is thrown; what is returned
 * is the replay store's answer (one Redis `SET NX`), or undefined when there is nothing to await.
 */
export type DpopCheck = (r: DpopRequest, t: VerifiedToken) => Promise<void> | undefined;

/** The replay store's answer: a jti seen before is a replayed proof. */
function firstUse(first: boolean): void {
  if (!first) throw new DpopRefusedError('invalid_dpop_proof', 'the DPoP proof has been used before');
}

/**
 * RFC 9449 §7 at the gateway. An unbound token as Bearer returns at once (no cost). A bound token (`cnf.jkt`)
 * must come as `DPoP` (else `dpop_required`, §7.2: a stolen token replayed as Bearer); a DPoP request needs one
 * proof for this method and URL, by the token's key, with the token's `ath`, and — last, so a refused request
 * never reaches Redis — a jti not seen before by any replica (one `SET NX EX`).
 */
export function createDpopCheck(deps: DpopCheckDeps): DpopCheck {
  const { publicBaseUrl, replay, nonces } = deps;
  const nonceValid = nonces && ((n: string) => nonces.nonceValid(n));

  /**
   * Everything but the replay check runs synchronously (a refusal is thrown before any await); what is returned is
   * the Redis round trip alone.
   */
  function checkProof(r: DpopRequest, t: VerifiedToken): Promise<void> {
    if (r.proof === undefined) throw new DpopRefusedError('invalid_dpop_proof', 'no DPoP proof header');
    if (r.proofRepeated) throw new DpopRefusedError('invalid_dpop_proof', 'more than one DPoP proof header');
    let jkt: string;
    let jti: string;
    try {
      ({ jkt, jti } = verifyDpopProof(r.proof, {
        method: r.method,
        url: publicBaseUrl + r.path,
        accessToken: r.presented.token,
        nonceValid,
        algorithms: GATEWAY_DPOP_ALGORITHMS,
      }));
    } catch (e) {
      if (!(e instanceof DpopProofError)) throw e;
      if (e.reason === 'use_dpop_nonce')
        throw new DpopRefusedError('use_dpop_nonce', 'a DPoP nonce is required', nonces!.issueNonce());
      throw new DpopRefusedError('invalid_dpop_proof', e.message);
    }
    if (jkt !== t.jkt)
      throw new DpopRefusedError(
        'invalid_dpop_proof',
        'the DPoP proof key is not the key the token is bound to',
      );
    return replay.firstUse(jti, jkt, DPOP_JTI_RETENTION_SECONDS).then(firstUse);
  }

  return (r, t) => {
    if (!r.presented.dpop) {
      if (t.jkt === '') return undefined;
      throw new InvalidTokenError(
        'dpop_required',
        'the token is DPoP-bound: send it as Authorization: DPoP with a DPoP proof',
      );
    }
    if (t.jkt === '') {
      throw new InvalidTokenError('token_not_bound', 'the DPoP scheme needs a DPoP-bound token (cnf.jkt)');
    }
    return checkProof(r, t);
  };
}
