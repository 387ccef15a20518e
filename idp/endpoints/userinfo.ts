import { sendJson } from '../../lib/http.ts';
import type { Endpoint } from '../context.ts';
import { InvalidTokenError } from '../errors.ts';
import { verifyOwnAccessToken } from '../tokens/jwt.ts';

/** GET|POST /oauth/userinfo: `sub` and `email` of a platform access token that is not revoked. */
export const userinfo: Endpoint = async (ctx, x) => {
  const auth = x.req.headers.authorization ?? '';
  const m = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/i.exec(auth);
  if (!m) throw new InvalidTokenError('a platform access token is required as a Bearer token');
  const claims = verifyOwnAccessToken(m[1]!, ctx.keys, {
    issuer: ctx.config.issuer,
    audience: ctx.config.audience,
  });
  if (!claims) throw new InvalidTokenError('the access token is invalid or expired');
  // The same rule the gateways apply: the jti denylist, the subject's and the email's cut-offs.
  if (await ctx.revocation.isRevoked(claims)) throw new InvalidTokenError('the access token is revoked');
  sendJson(x.res, 200, { sub: claims.sub, email: claims.email }, { 'cache-control': 'no-store' });
};
