import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { CliError } from '../client/errors.ts';
import type { AdminCommandKit } from './api.ts';

// `platform admin clients add …` registers a machine client (client_credentials with private_key_jwt) and
// `platform admin revoke-client --client-id C` ends it: requests to /admin/api/clients and /admin/api/revoke-client.

interface Flags {
  issuer?: string;
  token?: string;
  name?: string;
  jwksFile?: string;
  jwksUri?: string;
  email?: string;
  service?: string[];
  workloadIssuer?: string;
  workloadSubject?: string;
  mayAct?: boolean;
  clientId?: string;
  json?: boolean;
}

const usage = (message: string) => new CliError('USAGE', message, { exitCode: 2 });
const collect = (value: string, previous: string[] = []) => [...previous, value];

async function keySet(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw usage(`--jwks-file ${path}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw usage(`--jwks-file ${path} is not JSON (a JWK Set: {"keys": [...]})`);
  }
}

/** `clients` is the listing command; `add` is its subcommand (options of its own, like every admin command). */
export function registerMachineClientCommands(
  { command, act, io }: AdminCommandKit<Flags>,
  clients: Command,
): void {
  clients
    .command('add')
    .description(
      'register a machine client (client_credentials with private_key_jwt) and print its client_id',
    )
    .requiredOption('--name <name>', 'a name for the client (shown in the audit and the clients list)')
    .option('--jwks-file <file>', 'its public keys: a JWK Set file')
    .option('--jwks-uri <url>', 'its public keys: an https URL serving a JWK Set')
    .requiredOption(
      '--email <email>',
      'the email its tokens act as (a users row must exist for tools to serve it)',
    )
    .option('--service <name>', 'a service it may reach (repeat for several)', collect)
    .option('--workload-issuer <iss>', 'a trusted workload issuer whose assertions it may present')
    .option('--workload-subject <sub>', 'the `sub` of those assertions')
    .option(
      '--may-act',
      'it may exchange a user’s access token for one that names it as the actor (token exchange with act)',
    )
    .option('--json', 'print {"client_id": …} as JSON')
    // --issuer and --token are the `clients` command's: read with the subcommand's own options.
    .action((_flags: Flags, cmd: Command) => add(cmd.optsWithGlobals<Flags>()));
  const add = act(async (api, flags) => {
    if (Boolean(flags.jwksFile) === Boolean(flags.jwksUri))
      throw usage('give exactly one of --jwks-file and --jwks-uri');
    if (!flags.service?.length) throw usage('give at least one --service');
    if (Boolean(flags.workloadIssuer) !== Boolean(flags.workloadSubject))
      throw usage('--workload-issuer and --workload-subject go together');
    const body = {
      name: flags.name,
      ...(flags.jwksFile ? { jwks: await keySet(flags.jwksFile) } : { jwks_uri: flags.jwksUri }),
      email: flags.email,
      services: flags.service,
      ...(flags.workloadIssuer
        ? { workload_issuer: flags.workloadIssuer, workload_subject: flags.workloadSubject }
        : {}),
      ...(flags.mayAct ? { may_act: true } : {}),
    };
    const r = await api.json<{ client_id: string }>('POST', 'clients', { body });
    if (flags.json) return io.out(JSON.stringify({ client_id: r.client_id }));
    io.out(r.client_id);
  });

  command('revoke-client', 'end a machine client: no new token, and its live tokens refused within 1 s')
    .requiredOption('--client-id <id>', 'the machine client')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const clientId = flags.clientId?.trim();
        if (!clientId) throw usage('--client-id must not be empty');
        const r = await api.json<{ client_id: string; cutoff: number }>('POST', 'revoke-client', {
          body: { client_id: clientId },
        });
        if (flags.json) return io.out(JSON.stringify(r, null, 2));
        io.out(
          `revoked machine client ${r.client_id}: no new token; tokens issued at or before ` +
            `${new Date(r.cutoff * 1000).toISOString()} are refused`,
        );
      }),
    );
}
