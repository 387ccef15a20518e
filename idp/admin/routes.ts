import { auditExport, auditPage, auditPerHourRoute } from './audit.ts';
import { blockRoute, listBlocksRoute, unblockRoute } from './blocks.ts';
import { disconnectRoute, listConnectionsRoute } from './connections.ts';
import { grantRoute, listEntitlementsRoute, ungrantRoute } from './entitlements.ts';
import { addMachineClientRoute, listMachineClientsRoute, revokeClientRoute } from './machine-clients.ts';
import { clientsRoute, keysRoute, rotateKeysRoute } from './registry.ts';
import { revokeTokenRoute, revokeUserRoute } from './revoke.ts';
import type { AdminRoute } from './route-table.ts';
import { revokeSignInRoute, searchUsersRoute, userRoute, withdrawConsentRoute } from './users.ts';

/**
 * The admin API's one route table (docs/idp.md § Admin API). Adding a route is one line here plus its handler;
 * the router
 * (router.ts `runAdmin`) matches, runs it and writes the admin audit row, for the API and the console alike.
 */
export const adminRoutes: readonly AdminRoute[] = [
  { method: 'POST', path: '/admin/api/revoke-token', action: 'revoke-token', handler: revokeTokenRoute },
  { method: 'POST', path: '/admin/api/revoke-user', action: 'revoke-user', handler: revokeUserRoute },
  { method: 'POST', path: '/admin/api/block', action: 'block', handler: blockRoute },
  { method: 'POST', path: '/admin/api/unblock', action: 'unblock', handler: unblockRoute },
  { method: 'GET', path: '/admin/api/blocks', action: 'read-blocks', handler: listBlocksRoute },
  { method: 'GET', path: '/admin/api/audit', action: 'read-audit', handler: auditPage },
  { method: 'GET', path: '/admin/api/audit.jsonl', action: 'export-audit', handler: auditExport('jsonl') },
  { method: 'GET', path: '/admin/api/audit.csv', action: 'export-audit', handler: auditExport('csv') },
  {
    method: 'GET',
    path: '/admin/api/audit/per-hour',
    action: 'read-audit-per-hour',
    handler: auditPerHourRoute,
  },
  { method: 'GET', path: '/admin/api/users', action: 'search-users', handler: searchUsersRoute },
  { method: 'GET', path: '/admin/api/users/:email', action: 'read-user', handler: userRoute },
  { method: 'DELETE', path: '/admin/api/sign-ins/:id', action: 'revoke-sign-in', handler: revokeSignInRoute },
  {
    method: 'DELETE',
    path: '/admin/api/consents/:email/:client_id',
    action: 'withdraw-consent',
    handler: withdrawConsentRoute,
  },
  { method: 'GET', path: '/admin/api/clients', action: 'read-clients', handler: clientsRoute },
  { method: 'POST', path: '/admin/api/clients', action: 'add-client', handler: addMachineClientRoute },
  {
    method: 'GET',
    path: '/admin/api/machine-clients',
    action: 'read-machine-clients',
    handler: listMachineClientsRoute,
  },
  { method: 'POST', path: '/admin/api/revoke-client', action: 'revoke-client', handler: revokeClientRoute },
  { method: 'GET', path: '/admin/api/keys', action: 'read-keys', handler: keysRoute },
  { method: 'POST', path: '/admin/api/keys/rotate', action: 'rotate-keys', handler: rotateKeysRoute },
  { method: 'GET', path: '/admin/api/entitlements', action: 'entitlements', handler: listEntitlementsRoute },
  { method: 'POST', path: '/admin/api/entitlements', action: 'grant', handler: grantRoute },
  { method: 'DELETE', path: '/admin/api/entitlements', action: 'ungrant', handler: ungrantRoute },
  {
    method: 'GET',
    path: '/admin/api/connections',
    action: 'read-connections',
    handler: listConnectionsRoute,
  },
  { method: 'POST', path: '/admin/api/disconnect', action: 'disconnect', handler: disconnectRoute },
];
