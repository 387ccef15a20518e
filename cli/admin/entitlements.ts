import type { Command } from 'commander';
import { CliError } from '../client/errors.ts';
import type { AdminCommandKit } from './api.ts';
import { table } from './format.ts';

// `platform admin grant | ungrant | entitlements`: who may get a token for which service, when the IdP runs
// with PLATFORM_ENTITLEMENTS=managed, and entity grants (`--entity E --permission read|write`, carried in the
// token's `ent` claim). Requests to the admin API's /admin/api/entitlements.

interface Flags {
  service?: string;
  entity?: string;
  permission?: string;
  email?: string;
  role?: string;
  json?: boolean;
}

interface GrantAnswer {
  service?: string;
  entity?: string;
  permission?: string | null;
  email?: string;
  role?: string;
  created?: boolean;
  removed?: boolean;
  cutoff?: number;
  subjects?: string[];
  /** The IdP's PLATFORM_ENTITLEMENTS, on service grants. */
  mode?: string;
}

/** What a service grant changes while the IdP's entitlements are open: nothing yet (entity grants always apply). */
const noEffect = (r: GrantAnswer) =>
  r.service !== undefined && r.mode === 'open'
    ? '; no effect while the IdP’s entitlements are open (every user gets every service) until PLATFORM_ENTITLEMENTS=managed'
    : '';

export function registerEntitlementCommands({ command, act, io }: AdminCommandKit<Flags>): void {
  const grantee = (c: Command) =>
    c
      .option('--service <name>', 'the service (one of the IdP’s PLATFORM_SERVICES)')
      .option('--entity <key>', 'an entity (e.g. deal:42), instead of a service')
      .option('--permission <p>', 'with --entity: read or write (ungrant without it: both)')
      .option('--email <email>', 'a user')
      .option('--role <role>', 'a role of the web application (read through PLATFORM_ROLES_SQL)')
      .option('--json', 'print the API answer as JSON');

  grantee(command('grant', 'let a user, or everyone with a role, get tokens for a service')).action(
    act(async (api, flags) => {
      const r = await api.json<GrantAnswer>('POST', 'entitlements', { body: target(flags) });
      if (flags.json) return io.out(JSON.stringify(r, null, 2));
      io.out(`granted ${what(r)} to ${who(r)}${r.created ? '' : ' (already granted)'}${noEffect(r)}`);
    }),
  );

  grantee(
    command(
      'ungrant',
      'withdraw a grant; the live tokens of those who lose the service are cut within a second',
    ),
  ).action(
    act(async (api, flags) => {
      const r = await api.json<GrantAnswer>('DELETE', 'entitlements', { query: target(flags) });
      if (flags.json) return io.out(JSON.stringify(r, null, 2));
      const cut = r.subjects?.length
        ? `; live tokens cut for sub ${r.subjects.join(', ')} (their next refresh leaves ${what(r)} out)`
        : '';
      io.out(`${r.removed ? 'ungranted' : 'no such grant:'} ${what(r)} from ${who(r)}${cut}${noEffect(r)}`);
    }),
  );

  command('entitlements', 'the grants, or one user’s roles, grants and the services they get')
    .option('--email <email>', 'one user')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const email = flags.email?.trim();
        const r = await api.json<{
          mode: string;
          items?: object[];
          grants?: object[];
          roles?: string[];
          services?: string[];
          entities?: object[];
        }>('GET', 'entitlements', { query: { email: email || undefined } });
        if (flags.json) return io.out(JSON.stringify(r, null, 2));
        const grants = table(
          [
            ['service', 'service'],
            ['email', 'email'],
            ['role', 'role'],
            ['granted by', 'granted_by'],
            ['granted', 'granted_at'],
          ],
          r.items ?? r.grants ?? [],
        );
        const mode =
          r.mode === 'open'
            ? ' (PLATFORM_ENTITLEMENTS=open: every user gets every service; grants are kept for managed)'
            : '';
        io.out(`entitlements: ${r.mode}${mode}`);
        if (email) {
          io.out(
            `${email}   roles: ${r.roles?.join(', ') || '-'}   services: ${r.services?.join(', ') || '-'}`,
          );
        }
        io.out(grants);
        if (r.entities?.length) {
          io.out('');
          io.out(
            table(
              [
                ['entity', 'entity'],
                ['permission', 'permission'],
                ['email', 'email'],
                ['role', 'role'],
                ['granted by', 'granted_by'],
                ['granted', 'granted_at'],
              ],
              r.entities,
            ),
          );
        }
      }),
    );
}

function target(flags: Flags): Record<string, string> {
  const service = flags.service?.trim();
  const entity = flags.entity?.trim();
  const permission = flags.permission?.trim();
  if ((service ? 1 : 0) + (entity ? 1 : 0) !== 1)
    throw new CliError('USAGE', 'give exactly one of --service or --entity', { exitCode: 2 });
  if (permission && !entity) throw new CliError('USAGE', '--permission goes with --entity', { exitCode: 2 });
  const email = flags.email?.trim();
  const role = flags.role?.trim();
  if ((email ? 1 : 0) + (role ? 1 : 0) !== 1) {
    throw new CliError('USAGE', 'give exactly one of --email or --role', { exitCode: 2 });
  }
  const what: Record<string, string> = service
    ? { service }
    : { entity: entity!, ...(permission ? { permission } : {}) };
  return email ? { ...what, email } : { ...what, role: role! };
}

function what(r: GrantAnswer): string {
  if (r.entity === undefined) return String(r.service);
  return `${r.permission ?? 'read and write'} on ${r.entity}`;
}

function who(r: GrantAnswer): string {
  return r.email !== undefined ? r.email : `role ${r.role}`;
}
