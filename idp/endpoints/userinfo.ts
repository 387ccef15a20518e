import type { IncomingMessage } from 'node:http';
import { mediaType, readForm, sendJson } from '../../lib/http.ts';
import type { Endpoint, Exchange } from '../context.ts';
import { parseAuthorization } from '../dpop/index.ts';
import { InvalidBearerRequestError, InvalidTokenError } from '../errors.ts';
import { verifyOwnAccessToken } from '../tokens/jwt.ts';

const FORM_LIMIT = 16 * 1024;

/**
 * GET|POST /oauth/userinfo: `sub` and `email` of a platform access token that is not revoked. A DPoP-bound token
 * comes as `Authorization: DPoP` with a proof for this URL (idp/dpop).
 */
export const userinfo: Endpoint = async (ctx, x) => {
  const presented = await bearerToken(x);
  if (presented === undefined)
    throw new InvalidTokenError('a platform access token is required as a Bearer or DPoP token');
  const claims = verifyOwnAccessToken(presented.token, ctx.keyRing.published(), {
    issuer: ctx.config.issuer,
    audience: ctx.config.audience,
  });
  if (!claims) throw new InvalidTokenError('the access token is invalid or expired');
  await ctx.dpop.checkSender(x, { ...presented, jkt: claims.cnf?.jkt });
  // The same rule the gateways apply: the jti denylist, the subject's and the email's cut-offs.
  if (await ctx.revocation.isRevoked(claims)) throw new InvalidTokenError('the access token is revoked');
  sendJson(x.res, 200, { sub: claims.sub, email: claims.email }, { 'cache-control': 'no-store' });
};

/**
 * The access token, from the `Authorization: Bearer` header (RFC 6750 §2.1) or, on a POST with a form body, its
 * `access_token` parameter (§2.2). Never from the query (§2.3 is not offered: URLs end up in logs), and never from
 * two places at once (§2: a client MUST NOT use more than one method): both are 400 invalid_request.
 */
async function bearerToken(x: Exchange): Promise<{ scheme: 'Bearer' | 'DPoP'; token: string } | undefined> {
  if (new URLSearchParams(x.url.search).has('access_token'))
    throw new InvalidBearerRequestError('the access token must not be sent in the query');
  const header = x.req.headers.authorization;
  const fromBody = await bodyToken(x.req);
  if (header !== undefined && fromBody !== undefined)
    throw new InvalidBearerRequestError(
      'the access token was sent both in the Authorization header and the body',
    );
  if (fromBody !== undefined) return { scheme: 'Bearer', token: fromBody };
  if (header === undefined) return undefined;
  const presented = parseAuthorization(header);
  if (!presented)
    throw new InvalidTokenError('a platform access token is required as a Bearer or DPoP token');
  return presented;
}

/** A POST's form-encoded `access_token` (undefined for another method, another media type or no such field). */
async function bodyToken(req: IncomingMessage): Promise<string | undefined> {
  if (req.method !== 'POST' || mediaType(req) !== 'application/x-www-form-urlencoded') return undefined;
  const form = await readForm(req, FORM_LIMIT);
  const token = form.get('access_token');
  if (token !== undefined && !/^[A-Za-z0-9._~+/-]+=*$/.test(token))
    throw new InvalidTokenError('the access_token parameter is not a bearer token');
  return token;
}
