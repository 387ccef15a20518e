import { LIVE_PATH, READY_PATH, sendLive, sendReady } from '../lib/health.ts';
import { adminApi } from './admin/router.ts';
import type { IdpConfig, RateLimitedEndpoint } from './config.ts';
import {
  CONNECTIONS_MOUNT,
  CONNECTIONS_PATH,
  connectionPages,
  disconnectOwn,
  listOwnConnections,
} from './connections/routes.ts';
import { consoleMount } from './console/console.ts';
import { consoleRoutes } from './console/routes.ts';
import type { Endpoint } from './context.ts';
import { authorize } from './endpoints/authorize.ts';
import { authorizePost } from './endpoints/authorize-post.ts';
import { deviceAuthorization } from './endpoints/device-authorization.ts';
import { deviceDecision, deviceVerification } from './endpoints/device-verification.ts';
import { discovery } from './endpoints/discovery.ts';
import { jwks } from './endpoints/jwks.ts';
import { register } from './endpoints/register.ts';
import { revoke } from './endpoints/revoke.ts';
import { token } from './endpoints/token.ts';
import { userinfo } from './endpoints/userinfo.ts';

export type RouteTable = ReadonlyMap<string, Readonly<Record<string, Endpoint>>>;

/**
 * A path ending in `/` in the table mounts a sub-router for everything below it: the admin API, and the
 * console (everything else under /admin/, and /admin itself), and the connections (connect pages, disconnect). The
 * longer mount is tried first.
 */
const ADMIN_MOUNT = '/admin/api/';
const CONSOLE_MOUNT = '/admin/';
const MOUNTS = [ADMIN_MOUNT, CONSOLE_MOUNT, CONNECTIONS_MOUNT];
const ANY_METHOD = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

const health: Endpoint = async (_ctx, { res }) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': 15 });
  res.end('{"status":"ok"}');
};

const live: Endpoint = async (_ctx, { res }) => sendLive(res);
const ready: Endpoint = (ctx, { res }) => sendReady(res, ctx.readiness ?? {});

/** Counts the request against the endpoint's per-address limit before running it (docs/idp.md § Rate limits). */
function limited(name: RateLimitedEndpoint, endpoint: Endpoint): Endpoint {
  return async (ctx, x) => {
    await ctx.rateLimiter.consume(name, x.req);
    return endpoint(ctx, x);
  };
}

/** The provider's whole surface, in one place: path → method → endpoint. */
export function routes(config: IdpConfig): RouteTable {
  const meta = discovery(config);
  const admin = Object.fromEntries(ANY_METHOD.map((m) => [m, adminApi]));
  const consoleEndpoint = consoleMount(consoleRoutes);
  const consolePages = Object.fromEntries(ANY_METHOD.map((m) => [m, consoleEndpoint]));
  return new Map<string, Record<string, Endpoint>>([
    ['/.well-known/openid-configuration', { GET: meta }],
    ['/.well-known/oauth-authorization-server', { GET: meta }],
    ['/.well-known/jwks.json', { GET: jwks }],
    ['/oauth/authorize', { GET: authorize, POST: authorizePost }],
    ['/oauth/token', { POST: limited('token', token) }],
    ['/oauth/register', { POST: limited('register', register) }],
    ['/oauth/revoke', { POST: limited('revoke', revoke) }],
    ['/oauth/userinfo', { GET: userinfo, POST: userinfo }],
    ['/oauth/device_authorization', { POST: limited('device', deviceAuthorization) }],
    ['/oauth/device', { GET: deviceVerification, POST: deviceDecision }],
    ['/health', { GET: health }],
    [CONNECTIONS_PATH, { GET: listOwnConnections }],
    [CONNECTIONS_MOUNT, { GET: connectionPages, DELETE: disconnectOwn }],
    [LIVE_PATH, { GET: live, HEAD: live }],
    [READY_PATH, { GET: ready, HEAD: ready }],
    [ADMIN_MOUNT, admin],
    ['/admin', consolePages],
    [CONSOLE_MOUNT, consolePages],
  ]);
}

/**
 * The routes browsers call across origins (discovery, JWKS, register, token, revoke, userinfo, device
 * authorization): they answer CORS from any origin, without credentials. The authorize, consent,
 * device-verification and admin routes never send CORS headers.
 */
export const CORS_PATHS: ReadonlySet<string> = new Set([
  '/.well-known/openid-configuration',
  '/.well-known/oauth-authorization-server',
  '/.well-known/jwks.json',
  '/oauth/register',
  '/oauth/token',
  '/oauth/revoke',
  '/oauth/userinfo',
  '/oauth/device_authorization',
]);

export function findRoute(table: RouteTable, path: string): Readonly<Record<string, Endpoint>> | undefined {
  const exact = table.get(path);
  if (exact) return exact;
  const mount = MOUNTS.find((m) => path.startsWith(m));
  return mount ? table.get(mount) : undefined;
}
