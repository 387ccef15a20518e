import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { cacheSeconds, createMetadataFetcher, type FetchPolicy } from '../cimd/fetch.ts';
import { InvalidClientError } from '../errors.ts';

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
  /** The key set of a client: its `jwks`, or its `jwks_uri` fetched (SSRF rules, cached). */
  keysFor(c: { jwks?: unknown; jwksUri?: string }): Promise<JWTVerifyGetKey>;
  close(): Promise<void>;
}

/**
 * Key sets for private_key_jwt. A `jwks_uri` is fetched with the metadata documents' rules (https, public
 * addresses only unless the operator named the host, size and time limits, no redirects) and kept as its
 * Cache-Control says (at most 24 h, 5 min without it). Any failure is `invalid_client`.
 */
export function createClientKeySets(policy: FetchPolicy, now: () => number = Date.now): ClientKeySets {
  const fetcher = createMetadataFetcher({ ...policy, maxBytes: MAX_JWKS_BYTES });
  const cache = new Map<string, { keys: JWTVerifyGetKey; until: number }>();
  return {
    async keysFor(c) {
      if (c.jwks !== undefined) {
        try {
          return createLocalJWKSet(checkKeySet(c.jwks));
        } catch (err) {
          throw new InvalidClientError(`the client's jwks ${(err as Error).message}`);
        }
      }
      if (!c.jwksUri) throw new InvalidClientError('the client has no jwks or jwks_uri');
      const hit = cache.get(c.jwksUri);
      if (hit && hit.until > now()) return hit.keys;
      let url: URL;
      try {
        url = new URL(c.jwksUri);
      } catch {
        throw new InvalidClientError('the client jwks_uri is not a URL');
      }
      if (url.protocol !== 'https:') throw new InvalidClientError('the client jwks_uri must be https');
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
        cache.set(c.jwksUri, { keys, until: now() + ttl * 1000 });
      }
      return keys;
    },
    close: () => fetcher.close(),
  };
}
