import type { Env } from '../lib/config.ts';
import { onShutdown } from '../lib/lifecycle.ts';
import { createLogger } from '../lib/logger.ts';
import { loadDevConfig } from './dev/config.ts';
import { type DevStack, startDevStack } from './dev/stack.ts';

/**
 * `platform dev`: the whole stack in this one process on embedded defaults (CONTRACT.md § The two README
 * commands). Logs are JSON lines on stdout like every server; the summary for the human goes to stderr.
 */
export async function dev(env: Env): Promise<void> {
  const config = loadDevConfig(env, process.cwd());
  const log = createLogger({ name: 'dev', level: config.logLevel });
  const stack = await startDevStack(config, log);
  onShutdown(log, () => stack.close());
  process.stderr.write(banner(stack, config.dataDir));
}

function banner(stack: DevStack, dataDir: string): string {
  const lines = [
    '',
    'platform dev is running.',
    '',
    `  IdP (issuer)     ${stack.issuer}`,
    `  Sign-in page     ${stack.signInUrl}   (development: any email, no password)`,
    `  Gateway          ${stack.gatewayUrl}`,
    ...stack.services.map((s) => `  MCP ${s.name.padEnd(12)} ${s.url}`),
    `  Database         ${withoutPassword(stack.databaseUrl)}${stack.embeddedDatabase ? '   (embedded PGlite)' : ''}`,
    `  Data directory   ${dataDir}${stack.signingKeyCreated ? '   (new signing key created)' : ''}`,
    '',
    'Sign in from another terminal, then call a tool:',
    '',
    `  node bin/platform.js login --issuer ${stack.issuer}`,
    `  node bin/platform.js call platform whoami --gateway ${stack.gatewayUrl}`,
    '',
    'Stop with Ctrl-C.',
    '',
  ];
  return `${lines.join('\n')}\n`;
}

/** A DATABASE_URL may carry a password; the terminal (and whoever reads over a shoulder) need not see it. */
function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}
