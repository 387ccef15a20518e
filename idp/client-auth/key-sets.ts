import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { cacheSeconds, createMetadataFetcher, type FetchPolicy } from '../cimd/fetch.ts';
import { InvalidClientError } from '../errors.ts';
import { createOutboundBudget, type FetchGate, type OutboundBudget } from '../outbound/index.ts';

/** A key set document may be larger than a metadata document (several RSA keys). */
const MAX_JWKS_BYTES = 64 * 1024;
const MAX_ENTRIES = 1000;

/** A JWK Set: `keys`, an array of public keys (a private member is refused). */
export function checkKeySet(value: unknown): JSONWebKeySet {
  const keys = (value as { keys?: unknown } | null)?.keys;
  if (typeof value !== 'object' || value === null || !Array.isArray(keys) || keys.length === 0)
    throw new Error('must be a JWK Set: an object with a non-empty "keys" array');
  if (keys.length > 20) throw new Error('may hold at most 20 keys');
  for (const k of keys) {
    if (typeof k !== 'object' || k === null || typeof (k as { kty?: unknown }).kty !== 'string')
      throw new Error('every key must be a JWK object with "kty"');
    if ('d' in k || 'k' in k) throw new Error('must hold public keys only');
  }
  createLocalJWKSet(value as JSONWebKeySet);
  return value as JSONWebKeySet;
}

export interface ClientKeySets {
  /**
   * The key set of a client: its `jwks`, or its `jwks_uri` fetched (SSRF rules, cached) within the outbound-fetch
   * budget, each network fetch counted by `gate`.
   */
  keysFor(c: { jwks?: unknown; jwksUri?: string }, gate: FetchGate): Promise<JWTVerifyGetKey>;
  close(): Promise<void>;
}

/**
 * Key sets for private_key_jwt. A `jwks_uri` is fetched with the metadata documents' rules (https, public
 * addresses only unless the operator named the host, size and time limits, no redirects) and kept as its
 * Cache-Control says (at most 24 h, 5 min without it); within the outbound-fetch budget (idp/outbound), so an
 * answer that fails, is not a key set or may not be cached is not fetched again within the cool-down, however
 * many token requests name the client. Any failure is `invalid_client`.
 */
export function createClientKeySets(
  policy: FetchPolicy & { budget?: OutboundBudget },
  now: () => number = Date.now,
): ClientKeySets {
  const fetcher = createMetadataFetcher({ ...policy, maxBytes: MAX_JWKS_BYTES });
  const budget = policy.budget ?? createOutboundBudget({ now });
  const cache = new Map<string, { keys: JWTVerifyGetKey; until: number }>();
  async function load(url: URL): Promise<{ value: JWTVerifyGetKey; cacheSeconds: number }> {
    const { body, cacheControl } = await fetcher.fetch(url).catch((err: Error) => {
      throw new InvalidClientError(err.message.replace('client metadata document', 'client jwks_uri'));
    });
    let keys: JWTVerifyGetKey;
    try {
      keys = createLocalJWKSet(checkKeySet(body));
    } catch (err) {
      throw new InvalidClientError(`the client jwks_uri document ${(err as Error).message}`);
    }
    const ttl = cacheSeconds(cacheControl);
    if (ttl > 0) {
      if (cache.size >= MAX_ENTRIES) cache.delete(cache.keys().next().value!);
      cache.set(url.href, { keys, until: now() + ttl * 1000 });
    }
    return { value: keys, cacheSeconds: ttl };
  }
  return {
    async keysFor(c, gate) {
      if (c.jwks !== undefined) {
        try {
          return createLocalJWKSet(checkKeySet(c.jwks));
        } catch (err) {
          throw new InvalidClientError(`the client's jwks ${(err as Error).message}`);
        }
      }
      if (!c.jwksUri) throw new InvalidClientError('the client has no jwks or jwks_uri');
      let url: URL;
      try {
        url = new URL(c.jwksUri);
      } catch {
        throw new InvalidClientError('the client jwks_uri is not a URL');
      }
      if (url.protocol !== 'https:') throw new InvalidClientError('the client jwks_uri must be https');
      const hit = cache.get(url.href);
      if (hit && hit.until > now()) return hit.keys;
      return budget.fetch(url, gate, load);
    },
    close: () => fetcher.close(),
  };
}
