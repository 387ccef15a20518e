import type { Command } from 'commander';
import { CliError } from '../client/errors.ts';
import type { Io } from '../client/io.ts';
import type { AdminApi } from './api.ts';

// `platform admin block | unblock --email E`: a blocked user gets no code, device approval, refresh or userinfo
// answer, and is cut at every gateway like revoke-user. Requests to /admin/api/block and /admin/api/unblock.

interface Flags {
  email?: string;
  json?: boolean;
}

export interface BlockCommandKit {
  command: (name: string, description: string) => Command;
  act: (fn: (api: AdminApi, flags: Flags) => Promise<void>) => (flags: Flags) => Promise<void>;
  io: Io;
}

interface BlockAnswer {
  email: string;
  blocked: boolean;
  created?: boolean;
  removed?: boolean;
  cutoff?: number;
  subjects?: string[];
  refresh_families?: number;
  codes?: number;
}

function email(flags: Flags): string {
  const v = flags.email?.trim();
  if (!v) throw new CliError('USAGE', '--email must not be empty', { exitCode: 2 });
  return v;
}

export function registerBlockCommands({ command, act, io }: BlockCommandKit): void {
  command('block', 'block a user: revoke-user, and no new code, device approval, refresh or userinfo answer')
    .requiredOption('--email <email>', 'the user')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const r = await api.json<BlockAnswer>('POST', 'block', { body: { email: email(flags) } });
        if (flags.json) return io.out(JSON.stringify(r, null, 2));
        io.out(
          `blocked ${r.email}${r.created ? '' : ' (was blocked already)'}: tokens issued at or before ` +
            `${new Date((r.cutoff ?? 0) * 1000).toISOString()} are refused; ${r.refresh_families} sign-in(s) and ` +
            `${r.codes} code(s) revoked; no new sign-in until unblocked`,
        );
      }),
    );

  command('unblock', 'let a blocked user sign in again (tokens revoked by the block stay revoked)')
    .requiredOption('--email <email>', 'the user')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const r = await api.json<BlockAnswer>('POST', 'unblock', { body: { email: email(flags) } });
        if (flags.json) return io.out(JSON.stringify(r, null, 2));
        io.out(r.removed ? `unblocked ${r.email}: the user may sign in again` : `${r.email} was not blocked`);
      }),
    );
}
