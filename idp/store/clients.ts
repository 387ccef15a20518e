import type { Pool } from '../../lib/db.ts';

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

export function createClientStore(pool: Pool): ClientStore {
  // Clients change rarely and are read on every authorize, token and revoke request.
  const cache = new Map<string, { client: Client; until: number }>();
  return {
    async find(clientId) {
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
