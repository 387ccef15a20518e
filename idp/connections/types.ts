// The seam between the token endpoint's exchange grant (RFC 8693, idp/endpoints) and the connections store
// (idp/connections): what the exchange asks of a connection, and what it gets back.

/** The user an exchange is for: the subject token's user as the provider's tables know them. */
export interface ConnectionUser {
  /** users.id */
  userId: string;
  /** lowercased */
  email: string;
}

/** The user's upstream access token, or why there is none (the exchange's `interaction_required`). */
export type UpstreamToken =
  | {
      ok: true;
      accessToken: string;
      /** When the upstream said the token expires; undefined when it did not say. */
      expiresAt?: Date;
      /** The scope the upstream granted, when it said. */
      scope?: string;
    }
  | {
      ok: false;
      error: 'interaction_required';
      /** Words for the client: not connected, or the upstream refused the stored grant (now dropped). */
      description: string;
      /** Where the user connects: `{issuer}/connections/<name>` (oauth) or PLATFORM_LOGIN_URL (entra). */
      connectUri: string;
    };

/** The configured connections (PLATFORM_CONNECTIONS_FILE), as the exchange grant uses them. */
export interface Connections {
  /** A connection of that name is configured. */
  has(name: string): boolean;
  /**
   * The user's access token for the connection, refreshed first at the upstream when it expires within 60 s
   * (once for concurrent callers of one user and connection); a refresh the upstream refuses drops the grant.
   */
  accessToken(user: ConnectionUser, name: string): Promise<UpstreamToken>;
}
