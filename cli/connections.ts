import { withDpop } from '@modelcontextprotocol/client';
import { table } from './admin/format.ts';
import { readCredentials } from './client/credentials.ts';
import { CliError, describeError } from './client/errors.ts';
import type { Io } from './client/io.ts';
import type { ClientConfig } from './config.ts';
import { presentedToken } from './token.ts';

// `platform connections [--json]` and `platform connections disconnect <name>`: the signed-in user's own
// connections, through the IdP's GET /connections and DELETE /connections/<name> with the user's platform token
// (docs/connections.md § For users). No upstream token is ever sent to or printed by the CLI.

interface Listing {
  name: string;
  kind: string;
  display_name: string;
  connected: boolean;
  connected_at: string | null;
  upstream_subject: string | null;
  scopes: string[];
  expires_at: string | null;
  connect_uri: string;
}

async function request(config: ClientConfig, io: Io, method: string, path: string): Promise<unknown> {
  const stored = config.token
    ? undefined
    : await readCredentials(config.credentialsPath).catch(() => undefined);
  const issuer = !config.issuerGiven && stored ? stored.issuer : config.issuer;
  const { token, dpop } = await presentedToken(config, io);
  const fetchImpl: typeof fetch = dpop
    ? (withDpop(dpop.session, () => token)(fetch) as typeof fetch)
    : (url, init) => {
        const headers = new Headers(init?.headers);
        headers.set('authorization', `Bearer ${token}`);
        return fetch(url, { ...init, headers });
      };
  const url = `${issuer}${path}`;
  let res: Response;
  try {
    res = await fetchImpl(url, { method, signal: AbortSignal.timeout(15_000) });
  } catch (err) {
    throw new CliError('UNREACHABLE', `${url}: ${describeError(err)}`);
  }
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new CliError('CALL_FAILED', `${url} answered ${res.status} with no JSON body`);
  }
  if (!res.ok) {
    const e = body as { error?: string; error_description?: string };
    throw new CliError(
      'CALL_FAILED',
      `${url} answered ${res.status}: ${e.error_description ?? e.error ?? 'an error'}`,
    );
  }
  return body;
}

export async function listConnections(
  config: ClientConfig,
  flags: { json?: boolean },
  io: Io,
): Promise<void> {
  const r = (await request(config, io, 'GET', '/connections')) as { connections: Listing[] };
  if (flags.json) return io.out(JSON.stringify(r, null, 2));
  if (r.connections.length === 0) return io.out('no connections are configured');
  io.out(
    table(
      [
        ['NAME', 'name'],
        ['CONNECTED AT', 'connected_at'],
        ['UPSTREAM SUBJECT', 'upstream_subject'],
        ['SCOPES', 'scopes'],
        ['EXPIRES', 'expires_at'],
        ['CONNECT', 'connect'],
      ],
      r.connections.map((c) => ({
        ...c,
        connected_at: c.connected_at ?? 'not connected',
        scopes: c.scopes.join(' '),
        connect: c.connected ? '' : c.connect_uri,
      })),
    ),
  );
}

export async function disconnect(config: ClientConfig, name: string, io: Io): Promise<void> {
  if (!/^[a-z][a-z0-9-]{0,31}$/.test(name))
    throw new CliError('USAGE', `"${name}" is not a connection name`, { exitCode: 2 });
  const r = (await request(config, io, 'DELETE', `/connections/${name}`)) as {
    disconnected: boolean;
    revoked: boolean;
  };
  io.out(
    r.disconnected
      ? `disconnected ${name}${r.revoked ? ' (revoked at the upstream)' : ''}`
      : `${name} was not connected`,
  );
}
