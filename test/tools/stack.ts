// The real stack for the end-to-end tests: `platform idp`, the three `platform tool` servers and
// `platform gateway`, each its own process (optionally several replicas of each tool server), on free ports, against one test database and the suite's Redis.
import { inject } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import {
  freePort,
  type GatewayProcess,
  type IdpProcess,
  type RunningProcess,
  startGatewayProcess,
  startIdpProcess,
  startPlatform,
} from '../helpers/processes.ts';
import { IDENTITY_SECRET, type PostgresRelay, startPostgresRelay, toolKey } from './helpers.ts';

export const SERVICES = ['platform', 'mail', 'deals'] as const;

export interface Stack {
  db: TestDatabase;
  idp: IdpProcess;
  gateway: RunningProcess;
  /** The gateway's public origin, `{base_url}`. */
  baseUrl: string;
  /** The first replica of each tool server. */
  tools: Record<(typeof SERVICES)[number], RunningProcess>;
  /** Every replica of each tool server, in the order the gateway's upstream list names them. */
  replicas: Record<(typeof SERVICES)[number], RunningProcess[]>;
  /** The deals server reaches Postgres through this relay, so a test can take its database away. */
  dealsDb: PostgresRelay;
  /** Another replica of the gateway (same configuration and Redis, its own port), stopped with the stack. */
  anotherGateway(): Promise<GatewayProcess>;
  stop(): Promise<void>;
}

export interface StackOptions {
  /** PLATFORM_ADMIN_EMAILS of the IdP and of the tool servers (idpEnv may replace the IdP's). */
  adminEmails?: string[];
  /** Tool-server replicas per service (the gateway spreads requests over them). */
  replicas?: number;
  /** Runs on the fresh database before anything starts (tables of the test's own). */
  prepare?: (db: TestDatabase) => Promise<void>;
  /** Extra environment of the IdP and of the gateway. */
  idpEnv?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  /** Extra environment of one service's tool servers. */
  toolEnv?: Partial<Record<(typeof SERVICES)[number], Record<string, string>>>;
  /** The gateway's port, when a test must know `{base_url}` before the stack starts. */
  gatewayPort?: number;
}

export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const replicaCount = opts.replicas ?? 1;
  const db = await createTestDatabase();
  await opts.prepare?.(db);
  const dealsDb = await startPostgresRelay(db.url);
  const gatewayPort = opts.gatewayPort ?? (await freePort());
  const baseUrl = `http://127.0.0.1:${gatewayPort}`;
  const started: RunningProcess[] = [];
  try {
    const idp = await startIdpProcess({
      databaseUrl: db.url,
      redisUrl: inject('redisUrl'),
      env: {
        PUBLIC_BASE_URL: baseUrl,
        PLATFORM_SERVICES: SERVICES.join(','),
        PLATFORM_ADMIN_EMAILS: (opts.adminEmails ?? []).join(','),
        ...opts.idpEnv,
      },
    });
    started.push(idp);
    const tools = {} as Stack['tools'];
    const replicas = {} as Stack['replicas'];
    const upstreams: Record<string, string> = {};
    await Promise.all(
      SERVICES.map(async (name) => {
        const started1 = await Promise.all(
          Array.from({ length: replicaCount }, async () => {
            const port = await freePort();
            const p = startPlatform(['tool', name], {
              DATABASE_URL: name === 'deals' ? dealsDb.url : db.url,
              TOOL_IDENTITY_KEY: toolKey(name),
              PLATFORM_ADMIN_EMAILS: (opts.adminEmails ?? []).join(','),
              [`${name.toUpperCase()}_MCP_PORT`]: String(port),
              ...opts.toolEnv?.[name],
            });
            started.push(p);
            await p.waitFor(new RegExp(`${name} tool server listening`), 60_000);
            return { p, url: `http://127.0.0.1:${port}` };
          }),
        );
        tools[name] = started1[0]!.p;
        replicas[name] = started1.map((r) => r.p);
        upstreams[`${name.toUpperCase()}_MCP_UPSTREAM`] = started1.map((r) => r.url).join(',');
      }),
    );
    const gatewayEnv = {
      PUBLIC_BASE_URL: baseUrl,
      GATEWAY_SERVICES: SERVICES.join(','),
      ...upstreams,
      PLATFORM_ISSUER: idp.issuer,
      PLATFORM_AUDIENCE: idp.audience,
      REDIS_URL: inject('redisUrl'),
      GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
      ...opts.gatewayEnv,
    };
    const gateway = await startGatewayProcess(gatewayEnv, gatewayPort);
    started.push(gateway);
    return {
      db,
      idp,
      gateway,
      baseUrl,
      tools,
      replicas,
      dealsDb,
      async anotherGateway() {
        const g = await startGatewayProcess(gatewayEnv);
        started.push(g);
        return g;
      },
      async stop() {
        await Promise.all(started.map((p) => p.stop()));
        await dealsDb.close();
        await db.drop();
      },
    };
  } catch (err) {
    await Promise.all(started.map((p) => p.stop()));
    await dealsDb.close();
    await db.drop();
    throw err;
  }
}
