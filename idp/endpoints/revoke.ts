import { readForm } from '../../lib/http.ts';
import type { Endpoint } from '../context.ts';
import {
  InvalidRequestError,
  TemporarilyUnavailableError,
  UnauthorizedClientError,
  UnsupportedTokenTypeError,
} from '../errors.ts';
import { verifyOwnAccessToken } from '../tokens/jwt.ts';
import { hashRefreshToken } from './token.ts';

/**
 * POST /oauth/revoke (RFC 7009). A refresh token revokes its family in the database; an access token (a JWT we
 * signed) goes on the Redis jti denylist and is published so gateways drop it at once. Unknown tokens: 200.
 */
export const revoke: Endpoint = async (ctx, x) => {
  const form = await readForm(x.req);
  const token = form.get('token');
  if (!token) throw new InvalidRequestError('token is missing');
  const hint = form.get('token_type_hint');
  if (hint !== undefined && hint !== 'refresh_token' && hint !== 'access_token') {
    throw new UnsupportedTokenTypeError(`token_type_hint ${hint} is not supported`);
  }
  const clientId = form.get('client_id');

  if (token.split('.').length === 3) {
    // Only a token this provider signed can put a jti on the denylist: an unauthenticated caller must not be
    // able to deny arbitrary ids.
    const claims = verifyOwnAccessToken(token, ctx.keys, {
      issuer: ctx.config.issuer,
      audience: ctx.config.audience,
    });
    if (claims) {
      if (clientId && claims.azp !== clientId)
        throw new UnauthorizedClientError('token was issued to another client');
      try {
        await ctx.revocations.denyJti(claims.jti, claims.exp);
      } catch (err) {
        x.log.warn({ err: { message: (err as Error).message } }, 'revocation could not be published');
        throw new TemporarilyUnavailableError('the revocation could not be published; retry shortly');
      }
      x.log.info({ jti: claims.jti, sub: claims.sub }, 'access token revoked');
    }
  } else if (token.length <= 256) {
    const hash = hashRefreshToken(token);
    const found = await ctx.refreshTokens.revoke(hash);
    if (found) {
      if (clientId && found.clientId !== clientId)
        x.log.warn({ clientId }, 'refresh token revoked by another client id');
      x.log.info({ clientId: found.clientId }, 'refresh token revoked');
    }
  }
  x.res.writeHead(200, { 'cache-control': 'no-store', 'content-length': 0 });
  x.res.end();
};
