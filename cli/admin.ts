import type { Command } from 'commander';
import { AdminApi, type Query } from './admin/api.ts';
import { registerBlockCommands } from './admin/blocks.ts';
import { registerConnectionCommands } from './admin/connections.ts';
import { registerEntitlementCommands } from './admin/entitlements.ts';
import { NOT_PUBLISHED, parseChoice, parseCount, parseTime, table } from './admin/format.ts';
import { registerKeyCommands } from './admin/keys.ts';
import { registerMachineClientCommands } from './admin/machine-clients.ts';
import { CliError } from './client/errors.ts';
import { type Io, processIo } from './client/io.ts';
import { type ClientFlags, loadClientConfig, processEnv } from './config.ts';

/** Every `platform admin` option; each command uses its own few. */
interface AdminFlags extends ClientFlags {
  json?: boolean;
  email?: string;
  jti?: string;
  id?: string;
  client?: string;
  service?: string;
  since?: string;
  until?: string;
  limit?: string;
  format?: string;
}

/** The largest page the admin API serves; `audit --limit` beyond it is fetched page by page. */
const PAGE = 500;
const AUDIT_FORMATS = ['table', 'json', 'jsonl', 'csv'] as const;

/**
 * `platform admin …`: the client of the IdP's admin API (`/admin/api/…`), the one door into the IdP for
 * administration. Each command is one request (or a run of pages); results on stdout, `--json` for scripts.
 */
export function registerAdmin(program: Command, io: Io = processIo): void {
  const admin = program
    .command('admin')
    .description("administration through the IdP's admin API (token with scope platform:admin)");

  const command = (name: string, description: string) =>
    admin
      .command(name)
      .description(description)
      .option(
        '--issuer <url>',
        'the IdP (PLATFORM_ISSUER; default: the stored login’s issuer, else http://localhost:4000)',
      )
      .option(
        '--token <token>',
        'an access token with scope platform:admin (PLATFORM_TOKEN; default: the stored login)',
      );

  /** Runs `fn` with a connected API; a CliError is one line and its exit code. */
  const act =
    <F = AdminFlags>(fn: (api: AdminApi, flags: F) => Promise<void>) =>
    async (flags: F) => {
      try {
        const api = await AdminApi.connect(loadClientConfig(processEnv(), flags as ClientFlags), io);
        await fn(api, flags);
      } catch (err) {
        if (!(err instanceof CliError)) throw err;
        io.err(`platform: ${err.message}`);
        process.exitCode = err.exitCode;
      }
    };

  registerEntitlementCommands({ command, act, io });
  registerBlockCommands({ command, act, io });
  registerConnectionCommands({ command, act, io });

  command(
    'revoke-user',
    'revoke every token of a user: sign-ins, outstanding codes, and access tokens by a cut-off',
  )
    .requiredOption('--email <email>', 'the user')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const r = await api.json<{
          email: string;
          cutoff: number;
          subjects: string[];
          refresh_families: number;
          codes: number;
          published?: boolean;
        }>('POST', 'revoke-user', { body: { email: requireText('--email', flags.email) } });
        if (flags.json) return io.out(JSON.stringify(r, null, 2));
        io.out(
          `revoked ${r.email}: tokens issued at or before ${iso(r.cutoff)} are refused; ` +
            `${r.refresh_families} sign-in(s) and ${r.codes} authorization code(s) revoked` +
            (r.subjects.length
              ? ` (sub ${r.subjects.join(', ')})`
              : ' (no token was ever issued to this email)'),
        );
        if (r.published === false) io.err(NOT_PUBLISHED);
      }),
    );

  command('revoke-token', 'put one access token id (jti) on the denylist until the token expires')
    .requiredOption('--jti <jti>', 'the token id (jti claim)')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const r = await api.json<{
          jti: string;
          known: boolean;
          revoked: boolean;
          expires_at: string;
          published?: boolean;
        }>('POST', 'revoke-token', { body: { jti: requireText('--jti', flags.jti) } });
        if (flags.json) return io.out(JSON.stringify(r, null, 2));
        io.out(
          `revoked jti ${r.jti} until ${r.expires_at}` +
            (r.known ? '' : ' (no token with this id was issued here; it is denied anyway)'),
        );
        if (r.published === false) io.err(NOT_PUBLISHED);
      }),
    );

  command('audit', 'the issuance and administration audit, newest first')
    .option('--email <email>', 'only this user')
    .option('--client <client_id>', 'only this client')
    .option('--service <name>', 'only tokens for this service (scope mcp:<name>)')
    .option('--since <time>', 'from this time: ISO 8601, or a span back from now (30m, 2h, 7d)')
    .option('--until <time>', 'up to this time, same forms')
    .option('--limit <n>', 'at most this many rows (table and json: default 50)')
    .option(
      '--format <format>',
      'table, json (an array), jsonl or csv (jsonl and csv: everything unless --limit)',
      'table',
    )
    .option('--json', 'the same as --format json')
    .action(
      act(async (api, flags) => {
        const format = flags.json ? 'json' : parseChoice('--format', flags.format ?? 'table', AUDIT_FORMATS);
        const query: Query = {
          email: flags.email,
          client_id: flags.client,
          service: flags.service,
          since: flags.since === undefined ? undefined : parseTime('--since', flags.since),
          until: flags.until === undefined ? undefined : parseTime('--until', flags.until),
        };
        const limit = flags.limit === undefined ? undefined : parseCount('--limit', flags.limit, 1_000_000);
        if (format === 'jsonl' || format === 'csv') {
          return api.stream(`audit.${format}`, { ...query, limit }, process.stdout);
        }
        const items = await auditPages(api, query, limit ?? 50);
        if (format === 'json') return io.out(JSON.stringify(items, null, 2));
        // An issuance names its token (jti); an administrative action what it acted on (target).
        const rows = items.map((i) => {
          const r = i as Record<string, unknown>;
          return { ...r, what: r.jti ?? r.target };
        });
        io.out(
          table(
            [
              ['time', 'at'],
              ['event', 'event'],
              ['email', 'email'],
              ['client', 'client_id'],
              ['jti / target', 'what'],
              ['scope', 'scope'],
            ],
            rows,
          ),
        );
      }),
    );

  command('user', "a user's subjects, sign-ins (refresh-token families) and consents")
    .alias('sign-ins')
    .requiredOption('--email <email>', 'the user')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const u = await userRecord(api, requireText('--email', flags.email));
        if (flags.json) return io.out(JSON.stringify(u, null, 2));
        io.out(`${u.email}   sub ${u.subjects.join(', ') || '-'}`);
        io.out('');
        io.out(`sign-ins (${u.sign_ins.length}); end one with \`platform admin revoke-sign-in --id <id>\``);
        io.out(
          table(
            [
              ['id', 'id'],
              ['client', 'client_id'],
              ['created', 'created_at'],
              ['last used', 'last_used_at'],
            ],
            u.sign_ins,
          ),
        );
        io.out('');
        io.out(consentsTable(u.consents));
      }),
    );

  command('revoke-sign-in', 'revoke one sign-in (a refresh-token family), as listed by `platform admin user`')
    .requiredOption('--id <id>', 'the sign-in id')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const r = await api.json<{ id: string; revoked: boolean }>(
          'DELETE',
          `sign-ins/${encodeURIComponent(requireText('--id', flags.id))}`,
        );
        if (flags.json) return io.out(JSON.stringify(r, null, 2));
        io.out(`revoked sign-in ${r.id}`);
      }),
    );

  command('consents', 'the clients a user has consented to, and for which services')
    .requiredOption('--email <email>', 'the user')
    .option('--json', 'print the consents as JSON')
    .action(
      act(async (api, flags) => {
        const u = await userRecord(api, requireText('--email', flags.email));
        if (flags.json) return io.out(JSON.stringify(u.consents, null, 2));
        io.out(consentsTable(u.consents));
      }),
    );

  command('withdraw-consent', "withdraw a user's consent to a client (the client must ask again)")
    .requiredOption('--email <email>', 'the user')
    .requiredOption('--client <client_id>', 'the client')
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const email = requireText('--email', flags.email);
        const client = requireText('--client', flags.client);
        const r = await api.json<{ email: string; client_id: string; withdrawn: boolean }>(
          'DELETE',
          `consents/${encodeURIComponent(email)}/${encodeURIComponent(client)}`,
        );
        if (flags.json) return io.out(JSON.stringify(r, null, 2));
        io.out(`withdrew the consent of ${r.email} to ${r.client_id}`);
      }),
    );

  const clients = command(
    'clients',
    'the clients the IdP knows: built in, registered, machine, and metadata documents',
  ).option('--json', 'print the API answer as JSON');
  registerMachineClientCommands({ command, act, io }, clients);
  clients.action(
    act(async (api, flags) => {
      const r = await api.json<{ items: object[] }>('GET', 'clients');
      if (flags.json) return io.out(JSON.stringify(r.items, null, 2));
      io.out(
        table(
          [
            ['client', 'client_id'],
            ['kind', 'kind'],
            ['name', 'client_name'],
            ['consents', 'consents'],
            ['created', 'created_at'],
            ['redirect URIs', 'redirect_uris'],
          ],
          r.items,
        ),
      );
    }),
  );

  registerKeyCommands({ command, act, io });
}

interface UserRecord {
  email: string;
  subjects: string[];
  sign_ins: object[];
  consents: object[];
}

async function auditPages(api: AdminApi, query: Query, limit: number): Promise<object[]> {
  const items: object[] = [];
  let cursor: string | undefined;
  do {
    const page = await api.json<{ items: object[]; next_cursor: string | null }>('GET', 'audit', {
      query: { ...query, limit: Math.min(PAGE, limit - items.length), cursor },
    });
    items.push(...page.items);
    cursor = page.next_cursor ?? undefined;
  } while (cursor && items.length < limit);
  return items.slice(0, limit);
}

function userRecord(api: AdminApi, email: string): Promise<UserRecord> {
  return api.json<UserRecord>('GET', `users/${encodeURIComponent(email)}`);
}

function consentsTable(consents: object[]): string {
  return [
    `consents (${consents.length}); withdraw one with \`platform admin withdraw-consent --email <email> --client <client>\``,
    table(
      [
        ['client', 'client_id'],
        ['name', 'client_name'],
        ['services', 'services'],
        ['scopes', 'scopes'],
        ['granted', 'granted_at'],
      ],
      consents,
    ),
  ].join('\n');
}

function requireText(option: string, value: string | undefined): string {
  const v = value?.trim();
  if (!v) throw new CliError('USAGE', `${option} must not be empty`, { exitCode: 2 });
  return v;
}

function iso(unixSeconds: number): string {
  return new Date(unixSeconds * 1000).toISOString();
}
