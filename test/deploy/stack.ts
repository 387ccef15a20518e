// A real deployment in miniature for the doctor: `platform idp`, `platform tool platform` and `platform gateway`
// as their own processes on free ports, against a test database of its own and the suite's Redis, plus a
// signed-in user's platform access token. Services without a tool server point the gateway at a port where
// nothing listens (the "tool server down" case).
import { inject } from 'vitest';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { createTestDatabase, seedUser, type TestDatabase } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import {
  freePort,
  type IdpProcess,
  type RunningProcess,
  startGatewayProcess,
  startIdpProcess,
  startPlatform,
} from '../helpers/processes.ts';

const IDENTITY_SECRET = 'deploy-test-identity-secret-0123456789abcdef';

export interface DeployStack {
  db: TestDatabase;
  idp: IdpProcess;
  gateway: RunningProcess;
  /** The gateway itself, `http://127.0.0.1:<port>`. */
  gatewayUrl: string;
  gatewayPort: number;
  /** PUBLIC_BASE_URL: the gateway's own URL unless a proxy in front was named. */
  publicBaseUrl: string;
  /** A platform access token with every service's scope. */
  token: string;
  stop(): Promise<void>;
}

export async function startDeployStack(opts: {
  services: readonly string[];
  /** Services that get a running tool server (a subset of `services`). */
  live: readonly string[];
  /** PUBLIC_BASE_URL when a proxy fronts the gateway. */
  publicBaseUrl?: string;
  /** Each server's own REDIS_URL (a Redis with users); default: the suite's Redis for both. */
  redis?: { idp: string; gateway: string };
  /** More of the IdP's environment. */
  idpEnv?: Record<string, string>;
}): Promise<DeployStack> {
  const db = await createTestDatabase();
  const started: RunningProcess[] = [];
  try {
    const user = await seedUser(db.pool);
    const gatewayPort = await freePort();
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    const publicBaseUrl = opts.publicBaseUrl ?? gatewayUrl;
    const idp = await startIdpProcess({
      databaseUrl: db.url,
      redisUrl: opts.redis?.idp ?? inject('redisUrl'),
      env: { PUBLIC_BASE_URL: publicBaseUrl, PLATFORM_SERVICES: opts.services.join(','), ...opts.idpEnv },
    });
    started.push(idp);
    const upstreams: Record<string, string> = {};
    for (const name of opts.services) {
      const port = await freePort();
      upstreams[`${name.toUpperCase()}_MCP_UPSTREAM`] = `http://127.0.0.1:${port}`;
      if (!opts.live.includes(name)) continue;
      const tool = startPlatform(['tool', name], {
        DATABASE_URL: db.url,
        TOOL_IDENTITY_KEY: deriveIdentityKey(IDENTITY_SECRET, name),
        [`${name.toUpperCase()}_MCP_PORT`]: String(port),
      });
      started.push(tool);
      await tool.waitFor(new RegExp(`${name} tool server listening`), 20_000);
    }
    const gateway = await startGatewayProcess(
      {
        PUBLIC_BASE_URL: publicBaseUrl,
        GATEWAY_SERVICES: opts.services.join(','),
        ...upstreams,
        PLATFORM_ISSUER: idp.issuer,
        PLATFORM_AUDIENCE: idp.audience,
        REDIS_URL: opts.redis?.gateway ?? inject('redisUrl'),
        GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
        // A stopped tool server must show as a failed row at once, not after the 5 s retry window.
        GATEWAY_UPSTREAM_RETRY_SECONDS: '0',
      },
      gatewayPort,
    );
    started.push(gateway);
    const tokens = await signIn(idp.issuer, user.sessionToken, {
      scope: ['openid', 'email', ...opts.services.map((s) => `mcp:${s}`)].join(' '),
    });
    return {
      db,
      idp,
      gateway,
      gatewayUrl,
      gatewayPort,
      publicBaseUrl,
      token: tokens.access_token,
      async stop() {
        await Promise.all(started.map((p) => p.stop()));
        await db.drop();
      },
    };
  } catch (err) {
    await Promise.all(started.map((p) => p.stop()));
    await db.drop();
    throw err;
  }
}
