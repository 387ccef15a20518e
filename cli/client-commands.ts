import type { Command } from 'commander';
import { CliError } from './client/errors.ts';
import { type Io, processIo } from './client/io.ts';
import { type ClientFlags, loadClientConfig, processEnv } from './config.ts';

/**
 * `platform login | token | logout | call | tools`: the user-facing client. Each command lives in its own module, loaded
 * only when run, so the server subcommands do not pay for the OAuth and MCP client libraries.
 */
export function registerClientCommands(program: Command, io: Io = processIo): void {
  program
    .command('login')
    .description('sign in with the browser (loopback + PKCE) and store tokens for the other commands')
    .option('--issuer <url>', 'the platform issuer (PLATFORM_ISSUER, default http://localhost:4000)')
    .option(
      '--scope <scopes>',
      'the scopes to ask for, space-separated (default: every scope the IdP offers)',
    )
    .option('--no-browser', 'do not try to open a browser; only print the sign-in URL')
    .option('--device', 'sign in on another device (RFC 8628 device flow), for machines without a browser')
    .option(
      '--no-dpop',
      'plain bearer tokens: no proof key (for scripts that send `platform token` as Bearer)',
    )
    .action((flags: ClientFlags & { device?: boolean }) =>
      run(io, async () => {
        const config = loadClientConfig(processEnv(), flags);
        if (flags.device) return (await import('./login-device.ts')).loginWithDevice(config, io);
        return (await import('./login.ts')).login(config, io);
      }),
    );

  program
    .command('token')
    .description('print a valid access token, refreshing it silently when it is about to expire')
    .option('--token <token>', 'print this token instead (PLATFORM_TOKEN), for headless use')
    .option('--proof', 'print a DPoP proof for one request with the token instead (needs --method and --url)')
    .option('--method <method>', 'with --proof: the request method (htm)')
    .option('--url <url>', 'with --proof: the request URL (htu; the query is left out)')
    .option('--nonce <nonce>', 'with --proof: the DPoP-Nonce the server asked for')
    .action((flags: ClientFlags & { proof?: boolean; method?: string; url?: string; nonce?: string }) =>
      run(io, async () => {
        const token = await import('./token.ts');
        const config = loadClientConfig(processEnv(), flags);
        if (!flags.proof && (flags.method || flags.url || flags.nonce)) {
          throw new CliError('USAGE', '--method, --url and --nonce go with --proof', { exitCode: 2 });
        }
        if (!flags.proof) return io.out(await token.accessToken(config, io));
        if (!flags.method || !flags.url) {
          throw new CliError('USAGE', '--proof needs --method and --url', { exitCode: 2 });
        }
        io.out(await token.proofFor(config, { method: flags.method, url: flags.url, nonce: flags.nonce }));
      }),
    );

  program
    .command('logout')
    .description('revoke the stored refresh token at the issuer and delete it')
    .action(() =>
      run(io, async () => (await import('./logout.ts')).logout(loadClientConfig(processEnv()), io)),
    );

  program
    .command('call')
    .description('call an MCP tool through the gateway with the stored token')
    .argument('<service>', 'platform | mail | deals | …')
    .argument('<tool>', 'the tool name, e.g. whoami')
    .argument('[json-args]', "the tool's arguments as a JSON object")
    .option('--gateway <url>', 'the gateway (PLATFORM_GATEWAY_URL, default http://localhost:8080)')
    .option('--token <token>', 'use this access token (PLATFORM_TOKEN)')
    .action((service: string, tool: string, json: string | undefined, flags: ClientFlags) =>
      run(io, async () =>
        (await import('./call.ts')).call(loadClientConfig(processEnv(), flags), { service, tool, json }, io),
      ),
    );

  program
    .command('tools')
    .description("list a service's tools and their arguments through the gateway")
    .argument('<service>', 'platform | mail | deals | …')
    .option('--json', 'print the tools as the server lists them (JSON)')
    .option('--gateway <url>', 'the gateway (PLATFORM_GATEWAY_URL, default http://localhost:8080)')
    .option('--token <token>', 'use this access token (PLATFORM_TOKEN)')
    .action((service: string, flags: ClientFlags & { json?: boolean }) =>
      run(io, async () =>
        (await import('./tools.ts')).tools(
          loadClientConfig(processEnv(), flags),
          { service, json: flags.json },
          io,
        ),
      ),
    );
  const connections = program
    .command('connections')
    .description('your connections to systems behind the tools (list; `disconnect <name>`)')
    .option('--json', 'print the IdP answer as JSON')
    .option('--issuer <url>', 'the IdP (PLATFORM_ISSUER; default: the stored login’s issuer)')
    .option('--token <token>', 'use this access token (PLATFORM_TOKEN)')
    .action((flags: ClientFlags & { json?: boolean }) =>
      run(io, async () =>
        (await import('./connections.ts')).listConnections(loadClientConfig(processEnv(), flags), flags, io),
      ),
    );
  connections
    .command('disconnect')
    .description('drop a connection and revoke it at the upstream')
    .argument('<name>', 'the connection')
    .option('--issuer <url>', 'the IdP (PLATFORM_ISSUER; default: the stored login’s issuer)')
    .option('--token <token>', 'use this access token (PLATFORM_TOKEN)')
    .action((name: string, flags: ClientFlags) =>
      run(io, async () =>
        (await import('./connections.ts')).disconnect(loadClientConfig(processEnv(), flags), name, io),
      ),
    );
}

/** A CliError is the user's to act on: one line and its exit code. Anything else is main.ts's to report. */
async function run(io: Io, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    io.err(`platform: ${err.message}`);
    process.exitCode = err.exitCode;
  }
}
