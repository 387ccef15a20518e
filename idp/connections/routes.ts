import { sendJson } from '../../lib/http.ts';
import type { Endpoint, Exchange, IdpContext } from '../context.ts';
import { parseAuthorization } from '../dpop/index.ts';
import { InvalidTokenError, NotFoundError } from '../errors.ts';
import { sendPage } from '../pages/html.ts';
import { verifyOwnAccessToken } from '../tokens/jwt.ts';
import { ConnectPageError, connectErrorPage, finishConnect, startConnect } from './connect.ts';
import { CONNECTION_NAME } from './file.ts';
import type { ConnectionUser } from './types.ts';

// The IdP's /connections routes (docs/reference.md § IdP routes):
//   GET    /connections                  the bearer's connections (JSON; `platform connections`)
//   DELETE /connections/<name>           the bearer drops one and revokes it upstream (`… disconnect <name>`)
//   GET    /connections/<name>           the connect page (web session)
//   GET    /connections/<name>/callback  the upstream's answer (web session)

export const CONNECTIONS_PATH = '/connections';
export const CONNECTIONS_MOUNT = '/connections/';

/** The user of a platform access token (Bearer or DPoP), checked as userinfo checks it: signature, expiry, revocation. */
async function bearerUser(ctx: IdpContext, x: Exchange): Promise<{ user: ConnectionUser; clientId: string }> {
  const presented = parseAuthorization(x.req.headers.authorization ?? '');
  if (!presented)
    throw new InvalidTokenError('a platform access token is required as a Bearer or DPoP token');
  const claims = verifyOwnAccessToken(presented.token, ctx.keyRing.published(), {
    issuer: ctx.config.issuer,
    audience: ctx.config.audience,
  });
  if (!claims || typeof claims.email !== 'string')
    throw new InvalidTokenError('the access token is invalid or expired');
  await ctx.dpop.checkSender(x, { ...presented, jkt: claims.cnf?.jkt });
  if (await ctx.revocation.isRevoked(claims)) throw new InvalidTokenError('the access token is revoked');
  const users = await ctx.sessions.findUsersByEmail(claims.email);
  const found = users.find((u) => u.sub === claims.sub) ?? (users.length === 1 ? users[0] : undefined);
  if (!found) throw new InvalidTokenError('the access token names no known user');
  return { user: { userId: found.userId, email: found.email }, clientId: claims.azp };
}

function service(ctx: IdpContext) {
  if (!ctx.connections) throw new NotFoundError('no connections are configured (PLATFORM_CONNECTIONS_FILE)');
  return ctx.connections;
}

/** GET /connections: every configured connection with the bearer's state of it; never a token. */
export const listOwnConnections: Endpoint = async (ctx, x) => {
  const svc = service(ctx);
  const { user } = await bearerUser(ctx, x);
  sendJson(x.res, 200, { connections: await svc.list(user) }, { 'cache-control': 'no-store' });
};

/** Below /connections/: `<name>` or `<name>/callback`; anything else is 404. */
function parse(path: string): { name: string; callback: boolean } {
  const m = /^\/connections\/([^/]+)(\/callback)?$/.exec(path);
  const name = m?.[1] ?? '';
  if (!m || !CONNECTION_NAME.test(name)) throw new NotFoundError(`no route ${path}`);
  return { name, callback: m[2] !== undefined };
}

/** GET /connections/<name>[/callback]: the connect flow's pages; a refused step is an error page. */
export const connectionPages: Endpoint = async (ctx, x) => {
  const { name, callback } = parse(x.url.pathname);
  service(ctx);
  try {
    await (callback ? finishConnect(ctx, x, name) : startConnect(ctx, x, name));
  } catch (err) {
    if (!(err instanceof ConnectPageError)) throw err;
    x.log.warn({ connection: name, reason: err.message }, 'connect refused');
    sendPage(x.res, err.status, connectErrorPage(err));
  }
};

/** DELETE /connections/<name>: the bearer's grant dropped and revoked at the upstream. */
export const disconnectOwn: Endpoint = async (ctx, x) => {
  const { name, callback } = parse(x.url.pathname);
  if (callback) throw new NotFoundError(`no route ${x.url.pathname}`);
  const svc = service(ctx);
  const { user, clientId } = await bearerUser(ctx, x);
  if (!svc.has(name)) throw new NotFoundError(`no connection ${name}`);
  const out = await svc.disconnect(user, name, { clientId, requestId: x.requestId });
  sendJson(x.res, 200, { connection: name, ...out }, { 'cache-control': 'no-store' });
};
