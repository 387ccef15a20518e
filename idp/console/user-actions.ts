// The user page's actions (revoke all, block, revoke a sign-in, withdraw a consent, grant and ungrant): each one
// call of the admin API through `act`, which checks the form, writes the audit and redirects with a message.
import { act, type ConsoleHandler } from './console.ts';

/** The console page of one user. */
export const userPath = (email: string) => `/admin/users/${encodeURIComponent(email)}`;

/** POST /admin/users/:email/revoke-all → revoke-user. */
export const revokeAllAction: ConsoleHandler = (r) =>
  act(r, userPath(r.params.email ?? ''), async () => {
    const out = await r.api<{ email: string; refresh_families: number }>('POST', '/admin/api/revoke-user', {
      body: { email: r.params.email },
    });
    return `Revoked every token of ${out.email} and ${out.refresh_families} sign-in(s).`;
  });

/** POST /admin/users/:email/block and /unblock → POST block / unblock. */
export function blockAction(kind: 'block' | 'unblock'): ConsoleHandler {
  return (r) =>
    act(r, userPath(r.params.email ?? ''), async () => {
      const out = await r.api<{ email: string; refresh_families?: number }>('POST', `/admin/api/${kind}`, {
        body: { email: r.params.email },
      });
      return kind === 'block'
        ? `Blocked ${out.email}: every token revoked, ${out.refresh_families} sign-in(s) ended, no new sign-in until unblocked.`
        : `Unblocked ${out.email}: the user may sign in again.`;
    });
}

/** POST /admin/users/:email/sign-ins/:id/revoke → DELETE sign-ins/:id. */
export const revokeSignInAction: ConsoleHandler = (r) =>
  act(r, userPath(r.params.email ?? ''), async () => {
    await r.api('DELETE', `/admin/api/sign-ins/${encodeURIComponent(r.params.id ?? '')}`);
    return 'The sign-in was revoked: its client can no longer refresh.';
  });

/** POST /admin/users/:email/consents/withdraw (client_id) → DELETE consents/:email/:client_id. */
export const withdrawConsentAction: ConsoleHandler = (r) =>
  act(r, userPath(r.params.email ?? ''), async () => {
    const clientId = r.form.get('client_id') ?? '';
    const out = await r.api<{ sign_ins_revoked: number }>(
      'DELETE',
      `/admin/api/consents/${encodeURIComponent(r.params.email ?? '')}/${encodeURIComponent(clientId)}`,
    );
    return `Consent to ${clientId} withdrawn; ${out.sign_ins_revoked} sign-in(s) with it revoked.`;
  });

/** POST /admin/users/:email/grant and /ungrant (service) → POST / DELETE entitlements. */
export function entitlementAction(kind: 'grant' | 'ungrant'): ConsoleHandler {
  return (r) =>
    act(r, userPath(r.params.email ?? ''), async () => {
      const service = r.form.get('service') ?? '';
      if (kind === 'grant') {
        await r.api('POST', '/admin/api/entitlements', { body: { service, email: r.params.email } });
        return `Granted ${service} to ${r.params.email}.`;
      }
      const out = await r.api<{ removed: boolean }>('DELETE', '/admin/api/entitlements', {
        query: { service, email: r.params.email },
      });
      return out.removed
        ? `Ungranted ${service} from ${r.params.email}; live tokens for it are cut.`
        : `${r.params.email} had no grant of ${service}.`;
    });
}

/**
 * POST /admin/users/:email/entity-grant and /entity-ungrant (entity, permission, role: empty for this email)
 * → POST / DELETE entitlements with `entity`.
 */
export function entityGrantAction(kind: 'grant' | 'ungrant'): ConsoleHandler {
  return (r) =>
    act(r, userPath(r.params.email ?? ''), async () => {
      const entity = r.form.get('entity')?.trim() ?? '';
      const permission = r.form.get('permission') ?? '';
      const role = r.form.get('role')?.trim() ?? '';
      const who = role !== '' ? { role } : { email: r.params.email };
      const to = role !== '' ? `role ${role}` : (r.params.email ?? '');
      if (kind === 'grant') {
        const out = await r.api<{ created: boolean }>('POST', '/admin/api/entitlements', {
          body: { entity, permission, ...who },
        });
        return out.created
          ? `Granted ${permission} on ${entity} to ${to}.`
          : `${to} already had ${permission} on ${entity}.`;
      }
      const out = await r.api<{ removed: boolean }>('DELETE', '/admin/api/entitlements', {
        query: { entity, permission, ...who },
      });
      return out.removed
        ? `Ungranted ${permission} on ${entity} from ${to}; live tokens carrying it are cut.`
        : `${to} had no grant of ${permission} on ${entity}.`;
    });
}

/** POST /admin/users/:email/connections/disconnect (connection) → POST disconnect. */
export const disconnectAction: ConsoleHandler = (r) =>
  act(r, userPath(r.params.email ?? ''), async () => {
    const connection = r.form.get('connection') ?? '';
    const out = await r.api<{ disconnected: boolean; revoked: boolean }>('POST', '/admin/api/disconnect', {
      body: { email: r.params.email, connection },
    });
    return out.disconnected
      ? `Disconnected ${connection}${out.revoked ? ' and revoked it at the upstream' : ''}.`
      : `${r.params.email} had not connected ${connection}.`;
  });
