import { readForm } from '../../lib/http.ts';
import { authenticateClient } from '../client-auth/index.ts';
import type { Endpoint } from '../context.ts';
import {
  InvalidRequestError,
  TemporarilyUnavailableError,
  UnauthorizedClientError,
  UnsupportedTokenTypeError,
} from '../errors.ts';
import { NOT_PUBLISHED } from '../revocation.ts';
import { verifyOwnAccessToken } from '../tokens/jwt.ts';
import { hashRefreshToken } from './token-response.ts';

/**
 * POST /oauth/revoke (RFC 7009). A refresh token revokes its family in the database; an access token (a JWT we
 * signed) is recorded and put on the jti denylist, published so gateways drop it at once. Unknown tokens: 200.
 * A token issued to another client than the `client_id` given is refused with 400 unauthorized_client and
 * left alone (§2.1: the server verifies the token was issued to the requesting client).
 */
export const revoke: Endpoint = async (ctx, x) => {
  const form = await readForm(x.req);
  const token = form.get('token');
  if (!token) throw new InvalidRequestError('token is missing');
  const hint = form.get('token_type_hint');
  if (hint !== undefined && hint !== 'refresh_token' && hint !== 'access_token') {
    throw new UnsupportedTokenTypeError(`token_type_hint ${hint} is not supported`);
  }
  // A client that names itself is authenticated as it registered (RFC 7009 §2.1); naming none is allowed.
  const clientId = (await authenticateClient(ctx, x, form))?.clientId;

  if (token.split('.').length === 3) {
    // Only a token this provider signed can put a jti on the denylist: an unauthenticated caller must not be
    // able to deny arbitrary ids.
    const claims = verifyOwnAccessToken(token, ctx.keyRing.published(), {
      issuer: ctx.config.issuer,
      audience: ctx.config.audience,
    });
    if (claims) {
      if (clientId && claims.azp !== clientId)
        throw new UnauthorizedClientError('the token was issued to another client');
      const r = await ctx.revocation.revokeToken({
        jti: claims.jti,
        exp: claims.exp,
        by: `client:${claims.azp}`,
      });
      // A client has no `published` field to read: as before, 503 asks it to retry (the revocation stands).
      if (!r.published) throw new TemporarilyUnavailableError(NOT_PUBLISHED);
    }
  } else if (token.length <= 256) {
    const hash = hashRefreshToken(token);
    const found = await ctx.refreshTokens.familyOf(hash);
    if (found && clientId !== undefined && found.clientId !== clientId)
      throw new UnauthorizedClientError('the token was issued to another client');
    if (found) {
      // The whole sign-in: its refresh tokens and its live access tokens (RFC 7009 §2.1).
      await ctx.revocation.revokeFamily({
        familyId: found.familyId,
        by: `client:${found.clientId}`,
        reason: 'revoked',
      });
      x.log.info({ clientId: found.clientId }, 'refresh token revoked');
    }
  }
  x.res.writeHead(200, { 'cache-control': 'no-store', 'content-length': 0 });
  x.res.end();
};
