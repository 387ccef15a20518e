import type { IssuerKind } from '../../lib/identity.ts';

/** What a verified bearer says, normalised across the three trust paths. */
export interface VerifiedToken {
  kind: IssuerKind;
  iss: string;
  sub: string;
  /** Trimmed, lowercased (first of email, preferred_username, upn). */
  email: string;
  aud: readonly string[];
  /** The space-separated scope as the token states it (`scope`, or `scp` for Entra). */
  scope: string;
  scopes: readonly string[];
  clientId: string;
  /** `jti`, or Entra's `uti`; '' when the token has none. */
  jti: string;
  iat: number;
  exp: number;
}
