import { grantRoute, listEntitlementsRoute, ungrantRoute } from './entitlements.ts';
import { revokeTokenRoute, revokeUserRoute } from './revoke.ts';
import type { AdminRoute } from './router.ts';

/**
 * The admin API's one route table (docs/idp.md § Admin API). Adding a route is one line here plus its handler;
 * the router authenticates, matches, writes the admin audit row and answers.
 */
export const adminRoutes: readonly AdminRoute[] = [
  { method: 'POST', path: '/admin/api/revoke-token', action: 'revoke-token', handler: revokeTokenRoute },
  { method: 'POST', path: '/admin/api/revoke-user', action: 'revoke-user', handler: revokeUserRoute },
  { method: 'GET', path: '/admin/api/entitlements', action: 'entitlements', handler: listEntitlementsRoute },
  { method: 'POST', path: '/admin/api/entitlements', action: 'grant', handler: grantRoute },
  { method: 'DELETE', path: '/admin/api/entitlements', action: 'ungrant', handler: ungrantRoute },
];
