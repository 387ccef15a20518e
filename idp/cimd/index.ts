import type { IncomingMessage } from 'node:http';
import type { RateLimiter } from '../rate-limit.ts';
import { cacheSeconds, createMetadataFetcher, type FetchPolicy } from './fetch.ts';
import { type MetadataClient, parseClientIdUrl, validateMetadata } from './metadata.ts';

export { isMetadataClientId, type MetadataClient, parseClientIdUrl } from './metadata.ts';

const MAX_ENTRIES = 1000;

/**
 * Called before each network fetch of a document (not for a cache hit or a fetch already in flight); throwing
 * refuses the fetch. The endpoints count it against the rate limits (rate-limit.ts, `cimd` and `cimd_host`).
 */
export type FetchGate = (url: URL) => Promise<void>;

/** The gate the endpoints use: one fetch counted for the request's client address, then for the document's host. */
export function countedFetches(limiter: RateLimiter, req: IncomingMessage): FetchGate {
  return async (url) => {
    await limiter.consume('cimd', req);
    await limiter.consumeKey('cimd_host', url.host);
  };
}

export interface MetadataClients {
  /** The validated client a metadata-document client_id names; `invalid_client` on any failure. */
  get(clientId: string, beforeFetch: FetchGate): Promise<MetadataClient>;
  /** The cached document only, never a fetch; undefined when not cached. `invalid_client` for a bad URL. */
  cached(clientId: string): MetadataClient | undefined;
  close(): Promise<void>;
}

/**
 * Metadata-document clients: fetched on first use, validated, cached per Cache-Control (≤ 24 h, bounded in
 * number), one fetch at a time per URL. Failures are not cached: the next request tries again. Nothing here is
 * lasting: the cache is the only record of a document until a user approves its client (store/clients.ts).
 */
export function createMetadataClients(
  policy: FetchPolicy & {
    now?: () => number;
    /** Called after each successful fetch (not for cache hits). */
    onFetched?: (client: MetadataClient) => void;
    /** PLATFORM_CIMD_PINNED_DIR's documents (cimd/pinned.ts): served as they are, never fetched. */
    pinned?: ReadonlyMap<string, MetadataClient>;
  },
): MetadataClients {
  const fetcher = createMetadataFetcher(policy);
  const now = policy.now ?? Date.now;
  const cache = new Map<string, { client: MetadataClient; until: number }>();
  const inFlight = new Map<string, Promise<MetadataClient>>();

  async function load(url: URL): Promise<MetadataClient> {
    const { body, cacheControl } = await fetcher.fetch(url);
    const client = validateMetadata(url, body);
    policy.onFetched?.(client);
    const ttl = cacheSeconds(cacheControl);
    if (ttl > 0) {
      cache.delete(url.href);
      if (cache.size >= MAX_ENTRIES) cache.delete(cache.keys().next().value!);
      cache.set(url.href, { client, until: now() + ttl * 1000 });
    }
    return client;
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
      const hit = cached(url);
      if (hit) return hit;
      let p = inFlight.get(url.href);
      if (!p) {
        await beforeFetch(url);
        // Checked again: another request may have started the same fetch while the gate was counting.
        p = inFlight.get(url.href);
        if (!p) {
          p = load(url).finally(() => inFlight.delete(url.href));
          inFlight.set(url.href, p);
        }
      }
      return p;
    },
    cached: (clientId) => cached(parseClientIdUrl(clientId)),
    close: () => fetcher.close(),
  };
}
