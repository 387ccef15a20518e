import type { Endpoint } from '../context.ts';

/**
 * The published keys' public parts (during a rotation old and new together); never a private member. The
 * max-age is below the rotation's publish-ahead margin (idp/keys/schedule.ts `jwksMaxAge`), so a cache filled
 * just before a key is announced is renewed before that key signs.
 */
export const jwks: Endpoint = async (ctx, { res }) => {
  const { body, maxAge } = ctx.keyRing.jwks();
  res.writeHead(200, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'cache-control': `public, max-age=${maxAge}`,
  });
  res.end(body);
};
