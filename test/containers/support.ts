// What the container tests share: the stack's coordinates, a signed-in user with tokens, docker helpers.
import pg from 'pg';
import { inject } from 'vitest';
import { seedUser } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { loadContainerSuiteConfig } from './config.ts';
import { run } from './docker.ts';
import { compose, type StackInfo } from './stack.ts';

export const cfg = loadContainerSuiteConfig();
export const stack = (): StackInfo => inject('stack');

export function stackPool(): pg.Pool {
  const pool = new pg.Pool({ connectionString: stack().databaseUrl, max: 4 });
  pool.on('error', () => {});
  return pool;
}

export interface SignedIn {
  email: string;
  sub: string;
  accessToken: string;
  refreshToken: string;
}

/** A web-application user with a session, signed in through the proxy (authorize + token on an IdP replica). */
export async function signedInUser(pool: pg.Pool): Promise<SignedIn> {
  const user = await seedUser(pool);
  const tokens = await signIn(stack().baseUrl, user.sessionToken, {
    scope: 'openid email mcp:platform mcp:mail mcp:deals',
  });
  return {
    email: user.email,
    sub: user.sub,
    accessToken: tokens.access_token,
    refreshToken: tokens.refresh_token,
  };
}

/** Container ids of one compose service's replicas, in replica order. */
export async function replicas(service: string): Promise<string[]> {
  const { stdout } = await run(cfg.docker, [
    'ps',
    '--filter',
    `label=com.docker.compose.project=${stack().project}`,
    '--filter',
    `label=com.docker.compose.service=${service}`,
    '--format',
    '{{.Label "com.docker.compose.container-number"}} {{.ID}}',
  ]);
  return stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' ') as [string, string])
    .sort((a, b) => Number(a[0]) - Number(b[0]))
    .map(([, id]) => id);
}

export const docker = (args: string[], timeoutMs?: number) => run(cfg.docker, args, { timeoutMs });
export const composeRun = (args: string[], timeoutMs?: number) => compose(cfg, stack(), args, timeoutMs);

/** Waits until every container of the project that has a health check reports healthy. */
export async function allHealthy(timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { stdout } = await docker([
      'ps',
      '-a',
      '--filter',
      `label=com.docker.compose.project=${stack().project}`,
      '--format',
      '{{.Names}} {{.Status}}',
    ]);
    const pending = stdout
      .split('\n')
      .filter((l) => l && !/migrate/.test(l) && !/\(healthy\)/.test(l) && !/prometheus/.test(l));
    if (pending.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(`not healthy within ${timeoutMs / 1000} s: ${pending.join('; ')}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
