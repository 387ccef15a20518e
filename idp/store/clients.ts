import type { Pool } from '../../lib/db.ts';
import {
  type FetchGate,
  isMetadataClientId,
  type MetadataClient,
  type MetadataClients,
  parseClientIdUrl,
} from '../cimd/index.ts';
import type { AuthMethod } from '../client-auth/methods.ts';

export interface Client {
  clientId: string;
  name: string;
  redirectUris: string[];
  type: string;
  /** A Client ID Metadata Document client's document URL (its client_id); the consent page names its host. */
  metadataDocumentUrl?: string;
  /** The validated document, when it was read (not for a client known by its URL alone). */
  metadata?: Record<string, unknown>;
  /** token_endpoint_auth_method (idp/client-auth); absent: `none`. */
  authMethod?: AuthMethod;
  /** SHA-256 of the client_secret (client_secret_post / client_secret_basic). */
  secretHash?: string;
  /** private_key_jwt: the client's key set, or where to fetch it. */
  jwks?: unknown;
  jwksUri?: string;
  /** `dpop_bound_access_tokens: true` (RFC 9449 §5.2): every token request must carry a DPoP proof. */
  dpopBoundAccessTokens?: boolean;
  /** The registered `grant_types` (client-auth/grant-types.ts); absent: none registered, not limited. */
  grantTypes?: string[];
}

const stringList = (v: unknown): string[] | undefined =>
  Array.isArray(v) && v.every((g) => typeof g === 'string') ? v : undefined;

export interface ClientStore {
  /**
   * The client a client_id names. A metadata-document client_id is fetched (or taken from the cache) only when
   * `beforeFetch` is given, and the gate is passed first; without it nothing is fetched: the cached document, or
   * a client known by its URL alone, with no redirect URIs (the token endpoint: the grant presented decides).
   */
  find(clientId: string, beforeFetch?: FetchGate): Promise<Client | undefined>;
  create(client: Client & { metadata: Record<string, unknown> }): Promise<void>;
  /** A user approved the client: a metadata-document client is recorded (the clients list shows it). */
  recordApproved(client: Client): Promise<void>;
}

const fromMetadata = (m: MetadataClient): Client => ({
  clientId: m.clientId,
  name: m.name,
  redirectUris: m.redirectUris,
  type: 'metadata',
  metadataDocumentUrl: m.clientId,
  metadata: m.metadata,
  authMethod: m.metadata.token_endpoint_auth_method as AuthMethod,
  jwks: m.metadata.jwks,
  jwksUri: typeof m.metadata.jwks_uri === 'string' ? m.metadata.jwks_uri : undefined,
  dpopBoundAccessTokens: m.metadata.dpop_bound_access_tokens === true,
  grantTypes: stringList(m.metadata.grant_types),
});

/**
 * Clients by id: a configured client (PLATFORM_GATEWAY_CLIENT_SECRET's `platform-gateway`); an `https://`
 * client_id is a metadata document (fetched and validated, `invalid_client` with the reason when that fails); any
 * other is a row of platform.oauth_clients (built-in or registered). A metadata-document client gets a row (type
 * `metadata`) only when a user approves it; authorization always decides by the document, never by that row.
 */
export function createClientStore(
  pool: Pool,
  metadata?: MetadataClients,
  /** Clients that exist by configuration, never stored (the gateway's own client); they win over any row. */
  configured: readonly Client[] = [],
): ClientStore {
  // Clients change rarely and are read on every authorize, token and revoke request.
  const cache = new Map<string, { client: Client; until: number }>();
  const fixed = new Map(configured.map((c) => [c.clientId, c]));
  return {
    async find(clientId, beforeFetch) {
      const own = fixed.get(clientId);
      if (own) return own;
      if (metadata && isMetadataClientId(clientId)) {
        if (beforeFetch) return fromMetadata(await metadata.get(clientId, beforeFetch));
        const hit = metadata.cached(clientId);
        if (hit) return fromMetadata(hit);
        const url = parseClientIdUrl(clientId);
        return {
          clientId,
          name: url.host,
          redirectUris: [],
          type: 'metadata',
          metadataDocumentUrl: clientId,
        };
      }
      const hit = cache.get(clientId);
      if (hit && hit.until > Date.now()) return hit.client;
      const { rows } = await pool.query<{
        client_id: string;
        name: string;
        redirect_uris: string;
        type: string;
        auth_method: AuthMethod;
        secret_hash: string | null;
        jwks: unknown;
        jwks_uri: string | null;
        dpop_bound: boolean;
        grant_types: unknown;
      }>({
        name: 'client_find_auth',
        text: `SELECT client_id, name, redirect_uris, type, auth_method, secret_hash, metadata->'jwks' AS jwks,
                      metadata->>'jwks_uri' AS jwks_uri,
                      COALESCE(metadata->'dpop_bound_access_tokens' = 'true'::jsonb, false) AS dpop_bound,
                      metadata->'grant_types' AS grant_types
                 FROM platform.oauth_clients WHERE client_id = $1`,
        values: [clientId],
      });
      const r = rows[0];
      if (!r) return undefined;
      const client: Client = {
        clientId: r.client_id,
        name: r.name,
        redirectUris: JSON.parse(r.redirect_uris) as string[],
        type: r.type,
        authMethod: r.auth_method,
        secretHash: r.secret_hash ?? undefined,
        jwks: r.jwks ?? undefined,
        jwksUri: r.jwks_uri ?? undefined,
        dpopBoundAccessTokens: r.dpop_bound,
        grantTypes: stringList(r.grant_types),
      };
      if (cache.size > 10_000) cache.clear();
      cache.set(clientId, { client, until: Date.now() + 60_000 });
      return client;
    },
    async create(c) {
      await pool.query(
        `INSERT INTO platform.oauth_clients (client_id, name, redirect_uris, type, metadata, auth_method, secret_hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [
          c.clientId,
          c.name,
          JSON.stringify(c.redirectUris),
          c.type,
          JSON.stringify(c.metadata),
          c.authMethod ?? 'none',
          c.secretHash ?? null,
        ],
      );
    },
    async recordApproved(c) {
      if (!c.metadataDocumentUrl || !c.metadata) return;
      await pool.query({
        name: 'client_record_metadata',
        text: `INSERT INTO platform.oauth_clients (client_id, name, redirect_uris, type, metadata)
               VALUES ($1, $2, $3, 'metadata', $4)
               ON CONFLICT (client_id) DO UPDATE SET name = EXCLUDED.name, redirect_uris = EXCLUDED.redirect_uris,
                 metadata = EXCLUDED.metadata
               WHERE platform.oauth_clients.type = 'metadata'`,
        values: [c.clientId, c.name, JSON.stringify(c.redirectUris), JSON.stringify(c.metadata)],
      });
    },
  };
}
