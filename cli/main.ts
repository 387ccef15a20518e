import { Command, CommanderError } from 'commander';
import { ConfigError } from '../lib/config.ts';
import { versionLine } from '../lib/version.ts';
import { registerAdmin } from './admin.ts';
import { registerClientCommands } from './client-commands.ts';
import { processEnv } from './config.ts';
import { runMigrate } from './migrate.ts';

/** Every usage error is one line naming the help to read; subcommands made with `.command()` inherit it. */
class PlatformCommand extends Command {
  override createCommand(name?: string): Command {
    return new PlatformCommand(name);
  }
  override error(message: string, opts?: { code?: string; exitCode?: number }): never {
    const text = message.replace(/^error: /, '').replace(/\s*\n\s*/g, ' ');
    return super.error(`platform: ${text} (see \`${commandPath(this)} --help\`)`, opts);
  }
}

function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

const program = new PlatformCommand('platform')
  .description('Platform identity: OIDC provider, gateway, MCP tool servers and their clients')
  .option('-V, --version', 'print the version and the commit it was built from')
  .exitOverride();

// As commander's own .version(), but the commit is looked up only when asked for (it may run git).
program.on('option:version', () => {
  process.stdout.write(`${versionLine()}\n`);
  process.exit(0);
});

program
  .command('migrate')
  .description("apply the IdP's and the tool servers' migrations to DATABASE_URL (idempotent)")
  .action(() => runMigrate(processEnv()));

program
  .command('idp')
  .description('run the OpenID Connect provider')
  .action(async () => (await import('../idp/main.ts')).main(processEnv()));

program
  .command('gateway')
  .description('run the authenticating reverse proxy')
  .action(async () => (await import('../gateway/main.ts')).main(processEnv()));

program
  .command('tool')
  .description('run one MCP tool server: platform, mail or deals')
  .argument('<name>', 'platform | mail | deals')
  .action(async (name: string) => (await import('../tools/main.ts')).main(name, processEnv()));

program
  .command('dev')
  .description('the whole stack in one process on embedded defaults (PGlite, in-process cache)')
  .option(
    '--session <kind>',
    'the web session the sign-in page makes: database (an Auth.js sessions row) or jwt (an Auth.js JWT-strategy cookie); PLATFORM_DEV_SESSION',
  )
  .action(async (o: { session?: string }) =>
    (await import('./dev.ts')).dev(
      o.session === undefined ? processEnv() : { ...processEnv(), PLATFORM_DEV_SESSION: o.session },
    ),
  );

program
  .command('trial-env')
  .description(
    'print a deploy/.env for a trial on this machine (fresh secrets, profile trial; not for production)',
  )
  .option('--port <port>', "the proxy's port on 127.0.0.1; the issuer is http://localhost:<port>", '8080')
  .option(
    '--front-subnet <cidr>',
    'FRONT_SUBNET: a /24 no other network of this host uses',
    '172.16.240.0/24',
  )
  .option('--project <name>', 'COMPOSE_PROJECT_NAME', 'platform-trial')
  .action(async (opts: { port?: string; frontSubnet?: string; project?: string }) => {
    const { portInUseNote, trialEnv, trialEnvOptions } = await import('./trial/env.ts');
    const options = trialEnvOptions(opts);
    process.stdout.write(await trialEnv(options));
    const note = await portInUseNote(options.port);
    if (note) process.stderr.write(`${note}\n`);
  });

program
  .command('trial-sign-in')
  .description("run the trial's sign-in page standing in for the web application (compose profile trial)")
  .action(async () => (await import('./trial/server.ts')).main(processEnv()));

program
  .command('doctor')
  .description('run the operational checks (docs/operations.md) that can be run from outside')
  .requiredOption('--base-url <url>', 'public base URL of the deployment')
  .option('--service <name>', 'only this service (or a comma-separated list)')
  .option('--token <token>', 'a platform access token, to also check tools/list (default: PLATFORM_TOKEN)')
  .option('--compose <file>', 'the compose file of the deployment: adds the container and file checks')
  .option('--project <name>', 'its compose project (default: COMPOSE_PROJECT_NAME, the .env beside it)')
  .action(
    async (opts: {
      baseUrl: string;
      service?: string;
      token?: string;
      compose?: string;
      project?: string;
    }) => {
      const code = await (await import('../deploy/doctor.ts')).doctor(opts);
      process.exitCode = code;
    },
  );

program
  .command('identity-key')
  .description("print a tool server's TOOL_IDENTITY_KEY, derived from GATEWAY_IDENTITY_SECRET")
  .argument('<service>', 'the service name, e.g. deals')
  .action(async (service: string) => {
    const { printIdentityKey } = await import('./identity-key.ts');
    const { processIo } = await import('./client/io.ts');
    process.exitCode = printIdentityKey(service, processEnv(), processIo);
  });

registerClientCommands(program);
registerAdmin(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) process.exit(commanderExitCode(err));
  if (err instanceof ConfigError) {
    process.stderr.write(`platform: configuration error: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`platform: ${(err as Error).message}\n`);
  process.exit(1);
}

/**
 * commander exits 1 on every mistake; ours are 0 for help and --version, 2 for a usage error (unknown
 * subcommand or option, missing or malformed argument, and `platform` alone, which prints the help).
 */
function commanderExitCode(err: CommanderError): number {
  if (err.exitCode === 0) return 0;
  return err.code === 'commander.executeSubCommandAsync' ? err.exitCode : 2;
}
