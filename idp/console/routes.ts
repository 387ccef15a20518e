import type { ConsoleRoute } from './console.ts';
import { keysView, rotateAction } from './keys.ts';
import { addMachineClientAction, machineClientsView, revokeMachineClientAction } from './machine-clients.ts';
import { auditExportView, auditView, clientsView, homeView, usersView, userView } from './pages.ts';
import {
  blockAction,
  disconnectAction,
  entitlementAction,
  entityGrantAction,
  revokeAllAction,
  revokeSignInAction,
  withdrawConsentAction,
} from './user-actions.ts';

/**
 * The console's own route table (docs/console.md), mounted at /admin by the IdP's one table (idp/routes.ts).
 * Pages are GET; actions are form POSTs that redirect (303) back to the page they came from.
 */
export const consoleRoutes: readonly ConsoleRoute[] = [
  { method: 'GET', path: '/admin', handler: homeView },
  { method: 'GET', path: '/admin/audit', handler: auditView },
  { method: 'GET', path: '/admin/audit.jsonl', handler: auditExportView('jsonl') },
  { method: 'GET', path: '/admin/audit.csv', handler: auditExportView('csv') },
  { method: 'GET', path: '/admin/users', handler: usersView },
  { method: 'GET', path: '/admin/users/:email', handler: userView },
  { method: 'POST', path: '/admin/users/:email/revoke-all', handler: revokeAllAction },
  { method: 'POST', path: '/admin/users/:email/block', handler: blockAction('block') },
  { method: 'POST', path: '/admin/users/:email/unblock', handler: blockAction('unblock') },
  { method: 'POST', path: '/admin/users/:email/grant', handler: entitlementAction('grant') },
  { method: 'POST', path: '/admin/users/:email/ungrant', handler: entitlementAction('ungrant') },
  { method: 'POST', path: '/admin/users/:email/entity-grant', handler: entityGrantAction('grant') },
  { method: 'POST', path: '/admin/users/:email/entity-ungrant', handler: entityGrantAction('ungrant') },
  { method: 'POST', path: '/admin/users/:email/sign-ins/:id/revoke', handler: revokeSignInAction },
  { method: 'POST', path: '/admin/users/:email/consents/withdraw', handler: withdrawConsentAction },
  { method: 'POST', path: '/admin/users/:email/connections/disconnect', handler: disconnectAction },
  { method: 'GET', path: '/admin/clients', handler: clientsView },
  { method: 'GET', path: '/admin/machine-clients', handler: machineClientsView },
  { method: 'POST', path: '/admin/machine-clients/add', handler: addMachineClientAction },
  { method: 'POST', path: '/admin/machine-clients/revoke', handler: revokeMachineClientAction },
  { method: 'GET', path: '/admin/keys', handler: keysView },
  { method: 'POST', path: '/admin/keys/rotate', handler: rotateAction(false) },
  { method: 'POST', path: '/admin/keys/rotate-emergency', handler: rotateAction(true) },
];
