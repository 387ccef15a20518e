import { CliError } from '../client/errors.ts';
import type { AdminCommandKit } from './api.ts';
import { NOT_PUBLISHED } from './format.ts';

// `platform admin block | unblock --email E`: a blocked user gets no code, device approval, refresh or userinfo
// answer, and is cut at every gateway like revoke-user. Requests to /admin/api/block and /admin/api/unblock.

interface Flags {
  email?: string;
  json?: boolean;
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
  published?: boolean;
}

function email(flags: Flags): string {
  const v = flags.email?.trim();
  if (!v) throw new CliError('USAGE', '--email must not be empty', { exitCode: 2 });
  return v;
}

export function registerBlockCommands({ command, act, io }: AdminCommandKit<Flags>): void {
  const byEmail = (name: string, description: string) =>
    command(name, description)
      .requiredOption('--email <email>', 'the user')
      .option('--json', 'print the API answer as JSON');

  byEmail(
    'block',
    'block a user: revoke-user, and no new code, device approval, refresh or userinfo answer',
  ).action(
    act(async (api, flags) => {
      const r = await api.json<BlockAnswer>('POST', 'block', { body: { email: email(flags) } });
      if (flags.json) return io.out(JSON.stringify(r, null, 2));
      io.out(
        `blocked ${r.email}${r.created ? '' : ' (was blocked already)'}: tokens issued at or before ` +
          `${new Date((r.cutoff ?? 0) * 1000).toISOString()} are refused; ${r.refresh_families} sign-in(s) and ` +
          `${r.codes} code(s) revoked; no new sign-in until unblocked`,
      );
      if (r.published === false) io.err(NOT_PUBLISHED);
    }),
  );

  byEmail('unblock', 'let a blocked user sign in again (tokens revoked by the block stay revoked)').action(
    act(async (api, flags) => {
      const r = await api.json<BlockAnswer>('POST', 'unblock', { body: { email: email(flags) } });
      if (flags.json) return io.out(JSON.stringify(r, null, 2));
      io.out(r.removed ? `unblocked ${r.email}: the user may sign in again` : `${r.email} was not blocked`);
    }),
  );
}
