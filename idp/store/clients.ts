import type { Pool } from '../../lib/db.ts';
import { isMetadataClientId, type MetadataClient, type MetadataClients } from '../cimd/index.ts';

export interface Client {
  clientId: string;
  name: string;
  redirectUris: string[];
  type: string;
  /** A Client ID Metadata Document client's document URL (its client_id); the consent page names its host. */
  metadataDocumentUrl?: string;
}

export interface ClientStore {
  find(clientId: string): Promise<Client | undefined>;
  create(client: Client & { metadata: Record<string, unknown> }): Promise<void>;
}

/**
 * Records a metadata-document client as last fetched (type `metadata`), so administration can list it; the
 * document, not this row, stays what authorization decides by.
 */
export async function recordMetadataClient(pool: Pool, c: MetadataClient): Promise<void> {
  await pool.query({
    name: 'client_record_metadata',
    text: `INSERT INTO platform.oauth_clients (client_id, name, redirect_uris, type, metadata)
           VALUES ($1, $2, $3, 'metadata', $4)
           ON CONFLICT (client_id) DO UPDATE SET name = EXCLUDED.name, redirect_uris = EXCLUDED.redirect_uris,
             metadata = EXCLUDED.metadata
           WHERE platform.oauth_clients.type = 'metadata'`,
    values: [c.clientId, c.name, JSON.stringify(c.redirectUris), JSON.stringify(c.metadata)],
  });
}

/**
 * Clients by id: an `https://` client_id is a metadata document (fetched and validated, `invalid_client` with
 * the reason when that fails); any other is a row of platform.oauth_clients (built-in or registered).
 */
export function createClientStore(pool: Pool, metadata?: MetadataClients): ClientStore {
  // Clients change rarely and are read on every authorize, token and revoke request.
  const cache = new Map<string, { client: Client; until: number }>();
  return {
    async find(clientId) {
      if (metadata && isMetadataClientId(clientId)) {
        const m = await metadata.get(clientId);
        return {
          clientId: m.clientId,
          name: m.name,
          redirectUris: m.redirectUris,
          type: 'metadata',
          metadataDocumentUrl: m.clientId,
        };
      }
      const hit = cache.get(clientId);
      if (hit && hit.until > Date.now()) return hit.client;
      const { rows } = await pool.query<{
        client_id: string;
        name: string;
        redirect_uris: string;
        type: string;
      }>({
        name: 'client_find',
        text: 'SELECT client_id, name, redirect_uris, type FROM platform.oauth_clients WHERE client_id = $1',
        values: [clientId],
      });
      const r = rows[0];
      if (!r) return undefined;
      const client: Client = {
        clientId: r.client_id,
        name: r.name,
        redirectUris: JSON.parse(r.redirect_uris) as string[],
        type: r.type,
      };
      if (cache.size > 10_000) cache.clear();
      cache.set(clientId, { client, until: Date.now() + 60_000 });
      return client;
    },
    async create(c) {
      await pool.query(
        'INSERT INTO platform.oauth_clients (client_id, name, redirect_uris, type, metadata) VALUES ($1, $2, $3, $4, $5)',
        [c.clientId, c.name, JSON.stringify(c.redirectUris), c.type, JSON.stringify(c.metadata)],
      );
    },
  };
}
