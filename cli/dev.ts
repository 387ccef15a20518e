import { realpathSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Env } from '../lib/config.ts';
import { withoutPassword } from '../lib/db.ts';
import { onShutdown } from '../lib/lifecycle.ts';
import { createLogger } from '../lib/logger.ts';
import { startTracing } from '../lib/telemetry/index.ts';
import { type DevConfig, loadDevConfig } from './dev/config.ts';
import { type DevStack, startDevStack } from './dev/stack.ts';

/**
 * `platform dev`: the whole stack in this one process on embedded defaults (what `make dev` runs). Logs are
 * JSON lines on stdout like every server; the summary for the human goes to stderr.
 */
export async function dev(env: Env): Promise<void> {
  const config = loadDevConfig(env, process.cwd());
  const log = createLogger({ name: 'dev', level: config.logLevel });
  // One tracer (service platform-dev) for the whole stack; without an OTLP endpoint nothing is loaded.
  const tracing = await startTracing(config.telemetry, log);
  const stack = await startDevStack(config, log, tracing);
  onShutdown(log, async () => {
    await stack.close();
    await tracing?.shutdown();
  });
  process.stderr.write(banner(stack, config));
}

function banner(stack: DevStack, config: DevConfig): string {
  const { command, onPath } = cliCommand(config.searchPath);
  // Flags only where the value is not the CLI's default, so the usual lines stay short; every line runs as printed.
  const issuerFlag = stack.issuer === 'http://localhost:4000' ? '' : ` --issuer ${stack.issuer}`;
  const gatewayFlag = stack.gatewayUrl === 'http://localhost:8080' ? '' : ` --gateway ${stack.gatewayUrl}`;
  const lines = [
    '',
    'platform dev is running.',
    '',
    `  IdP (issuer)     ${stack.issuer}`,
    `  Sign-in page     ${stack.signInUrl}   (development: any email, no password)`,
    `  Gateway          ${stack.gatewayUrl}`,
    ...stack.services.map((s) => `  MCP ${s.name.padEnd(12)} ${s.url}`),
    `  Database         ${withoutPassword(stack.databaseUrl)}${stack.embeddedDatabase ? '   (embedded PGlite)' : ''}`,
    `  Data directory   ${config.dataDir}${stack.signingKeyCreated ? '   (new signing key created)' : ''}`,
    `  Administrators   ${config.adminEmails.split(',').join(', ')}   (PLATFORM_ADMIN_EMAILS)`,
    ...(config.session === 'jwt'
      ? [
          `  Web sessions     Auth.js JWT strategy (--session jwt), sealed under ${config.authjsSecretGiven ? 'PLATFORM_AUTHJS_SECRET' : config.authjsSecretPath}`,
        ]
      : []),
    '',
    'Sign in from another terminal (the sign-in page offers the development user), then call a tool:',
    '',
    `  ${command} login${issuerFlag}`,
    `  ${command} tools platform${gatewayFlag}`,
    `  ${command} call platform whoami${gatewayFlag}`,
    `  ${command} admin audit --limit 5`,
    '',
    ...(onPath ? [] : ['`make install` puts `platform` on your PATH (a link in ~/.local/bin).', '']),
    'Stop with Ctrl-C.',
    '',
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * How to run this checkout's CLI from the shell that ran `make dev`: `platform` when that name on PATH is this
 * checkout's (make install), else the script itself, which runs on any Node (it finds make's Node 24).
 */
function cliCommand(searchPath: string): { command: string; onPath: boolean } {
  const script = fileURLToPath(new URL('../bin/platform.js', import.meta.url));
  const real = realpathSync(script);
  for (const dir of searchPath.split(delimiter).filter(Boolean)) {
    try {
      if (realpathSync(join(dir, 'platform')) === real) return { command: 'platform', onPath: true };
    } catch {
      // not there
    }
  }
  const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
  return { command: process.cwd() === root ? './bin/platform.js' : script, onPath: false };
}
