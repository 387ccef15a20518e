import { Command, CommanderError } from 'commander';
import { ConfigError } from '../lib/config.ts';
import { registerAdmin } from './admin.ts';
import { processEnv } from './config.ts';
import { runMigrate } from './migrate.ts';

const program = new Command('platform')
  .description('Platform identity: OIDC provider, gateway, MCP tool servers and their clients')
  .showHelpAfterError()
  .exitOverride();

program
  .command('migrate')
  .description("apply the IdP's and the tool servers' migrations to DATABASE_URL (idempotent)")
  .action(() => runMigrate(processEnv()));

program
  .command('idp')
  .description('run the OpenID Connect provider')
  .action(async () => (await import('../idp/main.ts')).main(processEnv()));

registerAdmin(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) process.exit(err.exitCode);
  if (err instanceof ConfigError) {
    process.stderr.write(`platform: configuration error: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`platform: ${(err as Error).message}\n`);
  process.exit(1);
}
