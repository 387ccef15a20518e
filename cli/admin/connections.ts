import { CliError } from '../client/errors.ts';
import type { AdminCommandKit } from './api.ts';
import { table } from './format.ts';

// `platform admin connections --email E [--json]` and `platform admin disconnect --email E --connection N`:
// a user's connections (never a token) and dropping one, revoked at its upstream. /admin/api/connections and
// /admin/api/disconnect.

interface Flags {
  email?: string;
  connection?: string;
  json?: boolean;
}

interface Listing {
  name: string;
  connected: boolean;
  connected_at: string | null;
  upstream_subject: string | null;
  scopes: string[];
  expires_at: string | null;
}

function email(flags: Flags): string {
  const v = flags.email?.trim();
  if (!v) throw new CliError('USAGE', '--email must not be empty', { exitCode: 2 });
  return v;
}

export function registerConnectionCommands({ command, act, io }: AdminCommandKit<Flags>): void {
  command('connections', "a user's connections to systems behind the tools")
    .requiredOption('--email <email>', 'the user')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const r = await api.json<{ email: string; connections: Listing[] }>('GET', 'connections', {
          query: { email: email(flags) },
        });
        if (flags.json) return io.out(JSON.stringify(r, null, 2));
        io.out(
          table(
            [
              ['NAME', 'name'],
              ['CONNECTED AT', 'connected_at'],
              ['UPSTREAM SUBJECT', 'upstream_subject'],
              ['SCOPES', 'scopes'],
              ['EXPIRES', 'expires_at'],
            ],
            r.connections.map((c) => ({
              ...c,
              connected_at: c.connected_at ?? 'not connected',
              scopes: c.scopes.join(' '),
            })),
          ),
        );
      }),
    );

  command('disconnect', "drop a user's connection and revoke it at the upstream")
    .requiredOption('--email <email>', 'the user')
    .requiredOption('--connection <name>', 'the connection')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const r = await api.json<{
          email: string;
          connection: string;
          disconnected: boolean;
          revoked: boolean;
        }>('POST', 'disconnect', { body: { email: email(flags), connection: flags.connection } });
        if (flags.json) return io.out(JSON.stringify(r, null, 2));
        io.out(
          r.disconnected
            ? `disconnected ${r.connection} of ${r.email}${r.revoked ? ' (revoked at the upstream)' : ''}`
            : `${r.email} had not connected ${r.connection}`,
        );
      }),
    );
}
