import { sendJson } from '../../lib/http.ts';
import type { Endpoint } from '../context.ts';
import type { SigningKey } from '../tokens/keys.ts';

/** Every configured key's public part (rotation publishes old and new together); never a private member. */
export function jwks(keys: readonly SigningKey[]): Endpoint {
  const body = { keys: keys.map((k) => k.publicJwk) };
  return async (_ctx, { res }) => {
    sendJson(res, 200, body, { 'cache-control': 'public, max-age=300' });
  };
}
