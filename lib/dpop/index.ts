// DPoP (RFC 9449): proof verification, the jti replay store and server nonces, shared by the IdP and the gateway.
export { DPOP_NONCE_BUCKET_SECONDS, DpopNonces } from './nonce.ts';
export {
  accessTokenHash,
  DPOP_ALGORITHMS,
  DPOP_FUTURE_LEEWAY_SECONDS,
  DPOP_JTI_RETENTION_SECONDS,
  DPOP_MAX_AGE_SECONDS,
  DpopProofError,
  type DpopVerifyOptions,
  jwkThumbprint,
  normaliseHtu,
  type VerifiedDpopProof,
  verifyDpopProof,
} from './proof.ts';
export { type DpopReplayStore, dpopJtiKey, MemoryDpopReplayStore, RedisDpopReplayStore } from './replay.ts';
