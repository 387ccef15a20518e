import { createOutboundBudget, type FetchGate, type OutboundBudget } from '../outbound/index.ts';
import { cacheSeconds, createMetadataFetcher, type FetchPolicy } from './fetch.ts';
import { type MetadataClient, parseClientIdUrl, validateMetadata } from './metadata.ts';

export { countedFetches, type FetchGate } from '../outbound/index.ts';
export { isMetadataClientId, type MetadataClient, parseClientIdUrl } from './metadata.ts';

const MAX_ENTRIES = 1000;

export interface MetadataClients {
  /** The validated client a metadata-document client_id names; `invalid_client` on any failure. */
  get(clientId: string, beforeFetch: FetchGate): Promise<MetadataClient>;
  /** The cached document only, never a fetch; undefined when not cached. `invalid_client` for a bad URL. */
  cached(clientId: string): MetadataClient | undefined;
  close(): Promise<void>;
}

/**
 * Metadata-document clients: fetched on first use, validated, cached per Cache-Control (≤ 24 h, bounded in
 * number), within the outbound-fetch budget (idp/outbound: counted per address and host, one fetch at a time per
 * URL, a failed or uncacheable document not fetched again within the cool-down). Nothing here is lasting: the
 * cache is the only record of a document until a user approves its client (store/clients.ts).
 */
export function createMetadataClients(
  policy: FetchPolicy & {
    now?: () => number;
    /** Called after each successful fetch (not for cache hits). */
    onFetched?: (client: MetadataClient) => void;
    /** PLATFORM_CIMD_PINNED_DIR's documents (cimd/pinned.ts): served as they are, never fetched. */
    pinned?: ReadonlyMap<string, MetadataClient>;
    /** The IdP's one outbound-fetch budget (shared with the key sets); absent: one of its own. */
    budget?: OutboundBudget;
  },
): MetadataClients {
  const fetcher = createMetadataFetcher(policy);
  const now = policy.now ?? Date.now;
  const budget = policy.budget ?? createOutboundBudget({ now });
  const cache = new Map<string, { client: MetadataClient; until: number }>();

  async function load(url: URL): Promise<{ value: MetadataClient; cacheSeconds: number }> {
    const { body, cacheControl } = await fetcher.fetch(url);
    const client = validateMetadata(url, body);
    policy.onFetched?.(client);
    const ttl = cacheSeconds(cacheControl);
    if (ttl > 0) {
      cache.delete(url.href);
      if (cache.size >= MAX_ENTRIES) cache.delete(cache.keys().next().value!);
      cache.set(url.href, { client, until: now() + ttl * 1000 });
    }
    return { value: client, cacheSeconds: ttl };
  }

  function cached(url: URL): MetadataClient | undefined {
    const pin = policy.pinned?.get(url.href);
    if (pin) return pin;
    const hit = cache.get(url.href);
    if (hit && hit.until > now()) return hit.client;
    if (hit) cache.delete(url.href);
    return undefined;
  }

  return {
    async get(clientId, beforeFetch) {
      const url = parseClientIdUrl(clientId);
      return cached(url) ?? budget.fetch(url, beforeFetch, load);
    },
    cached: (clientId) => cached(parseClientIdUrl(clientId)),
    close: () => fetcher.close(),
  };
}
