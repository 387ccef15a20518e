import type { IssuerKind } from '../../lib/identity.ts';

/** What a verified bearer says, normalised across the three trust paths. */
export interface VerifiedToken {
  kind: IssuerKind;
  iss: string;
  sub: string;
  /**
   * The forwarded email, trimmed and lowercased: first of email, preferred_username, upn — for Entra, `email` only
   * when confirmed (auth/claims.ts entraEmailOf).
   */
  email: string;
  aud: readonly string[];
  /** The space-separated scope as the token states it (`scope`, or `scp` for Entra). */
  scope: string;
  scopes: readonly string[];
  clientId: string;
  /** `jti`, or Entra's `uti`; '' when the token has none. */
  jti: string;
  /**
   * Entra's `oid` (the user's object id in the tenant; '' for other tokens or when absent). Entra's `sub` is
   * pairwise per application, so a subject cut-off (`platform admin revoke-user`, keyed by the platform `sub`,
   * which is that object id when the web application signs its users in with the same tenant) is also checked
   * against `oid`.
   */
  oid: string;
  /**
   * `cnf.jkt` (RFC 9449 §6.1): the SHA-256 thumbprint of the key the token is bound to; '' for an unbound
   * token. A bound token is accepted only as `Authorization: DPoP` with a proof by that key (dpop/check.ts).
   */
  jkt: string;
  /** The platform token's `ent` claim as forwarded (`x-platform-entitlements`, lib/identity.ts); '' when none. */
  entitlements: string;
  /**
   * A delegated platform token's actors (RFC 8693 `act`), the current one first: the machine client acting for
   * the user, then any prior actor nested inside. Empty for a token the user's own client holds, and for Entra
   * and service tokens (only the platform IdP issues delegated tokens).
   */
  actors: readonly string[];
  /** `actors[0]`, '' when none: forwarded in `x-platform-actor` and matched by the policy's `actor:`. */
  actor: string;
  iat: number;
  exp: number;
}
