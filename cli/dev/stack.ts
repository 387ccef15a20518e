import { randomBytes } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { startGateway } from '../../gateway/server.ts';
import { startIdp } from '../../idp/server.ts';
import { ConfigError } from '../../lib/config.ts';
import { createPool, databaseConnectError } from '../../lib/db.ts';
import type { Logger } from '../../lib/logger.ts';
import { migrate } from '../../lib/migrate.ts';
import { MemoryRevocations } from '../../lib/revocation.ts';
import type { Tracing } from '../../lib/telemetry/index.ts';
import { startToolServer } from '../../tools/server.ts';
import { MIGRATION_SETS } from '../migrations.ts';
import { DEV_USER_EMAIL, type DevConfig, devGatewayConfig, devIdpConfig, devToolConfig } from './config.ts';
import { startEmbeddedPostgres } from './embedded-postgres.ts';
import { SIGN_IN_PATH, withDevSignIn } from './sign-in.ts';
import { loadOrCreateDevSecret, loadOrCreateDevSigningKey } from './signing-key.ts';

// The web application's tables; dev creates them because it stands in for the web application.
const AUTHJS_SCHEMA = new URL('../../idp/authjs/schema.sql', import.meta.url);

export interface DevStack {
  issuer: string;
  signInUrl: string;
  databaseUrl: string;
  /** True when the database is the embedded PGlite (not DATABASE_URL). */
  embeddedDatabase: boolean;
  signingKeyCreated: boolean;
  gatewayUrl: string;
  /** Each service's MCP endpoint through the gateway, the URL clients use. */
  services: ReadonlyArray<{ name: string; url: string }>;
  close(): Promise<void>;
}

/**
 * Starts the whole stack in this process, in dependency order: database (embedded unless DATABASE_URL), the
 * Auth.js tables and every migration, the signing key, the IdP with the dev sign-in page on its origin, the
 * tool servers, the gateway in front of them. A failure part-way closes what already started, so a retry finds its ports free.
 */
export async function startDevStack(config: DevConfig, log: Logger, tracing?: Tracing): Promise<DevStack> {
  const closers: Array<() => Promise<void>> = [];
  const closeAll = async () => {
    for (const close of closers.splice(0).reverse()) {
      await close().catch((err: unknown) => log.warn({ err }, 'dev: error while stopping'));
    }
  };
  try {
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
    let databaseUrl = config.databaseUrl;
    if (!databaseUrl) {
      const pg = await startEmbeddedPostgres({
        dataDir: config.pgliteDir,
        host: '127.0.0.1',
        port: config.embeddedPostgresPort,
        log: log.child({ component: 'postgres' }),
      }).catch(portInUse('PLATFORM_DEV_PG_PORT', config.embeddedPostgresPort));
      closers.push(() => pg.close());
      databaseUrl = pg.url;
    }

    const pool = createPool(databaseUrl, log, { max: 4, applicationName: 'platform-dev' });
    closers.push(() => pool.end());
    await pool.query(await readFile(AUTHJS_SCHEMA, 'utf8')).catch((err: unknown) => {
      // Only a DATABASE_URL can be out of reach here: the embedded database just started.
      throw databaseConnectError(err, databaseUrl, 'DATABASE_URL');
    });
    const migrated = await migrate(pool, MIGRATION_SETS);
    if (migrated.applied.length) log.info({ applied: migrated.applied }, 'dev: migrations applied');

    const key = await loadOrCreateDevSigningKey(config.signingKeyPath);
    // One process: the in-process store stands in for Redis unless REDIS_URL asks for the real thing.
    const revocations = config.redisUrl ? undefined : new MemoryRevocations();
    // --session jwt: the sign-in page sets an Auth.js JWT-strategy cookie under this AUTH_SECRET (the first of
    // PLATFORM_AUTHJS_SECRET when set, else the one kept under the data directory).
    const authjsSecret =
      config.session === 'jwt' && !config.authjsSecretGiven
        ? await loadOrCreateDevSecret(config.authjsSecretPath)
        : undefined;
    const idpConfig = devIdpConfig(config, { databaseUrl, privateKey: key.pem, authjsSecret });
    const idp = await startIdp(idpConfig, {
      log: log.child({ component: 'idp' }),
      revocations,
      tracing,
      host: config.host,
      wrapHandler: (handler) =>
        withDevSignIn(
          {
            pool,
            issuer: idpConfig.issuer,
            authjs: idpConfig.authjs,
            cookieName: idpConfig.sessionCookie,
            jwtSecret: config.session === 'jwt' ? idpConfig.authjsSecrets[0] : undefined,
            suggestedEmail: DEV_USER_EMAIL,
            adminEmails: config.adminEmails,
            log: log.child({ component: 'dev-sign-in' }),
          },
          handler,
        ),
    }).catch(portInUse('IDP_PORT', config.idpPort));
    closers.push(() => idp.close());

    // Per run: the tool servers trust only the gateway started alongside them.
    const identitySecret = randomBytes(32).toString('base64url');
    const toolUrls: Record<string, string> = {};
    for (const name of config.services) {
      const toolConfig = devToolConfig(config, name, { databaseUrl, identitySecret });
      const server = await startToolServer(name, toolConfig, {
        log: log.child({ component: `tool-${name}` }),
        host: config.host,
        tracing,
      }).catch(portInUse(`${name.toUpperCase()}_MCP_PORT`, toolConfig.port));
      closers.push(() => server.close());
      toolUrls[name] = `http://${hostForUrl(config.host)}:${server.port}`;
    }

    const gatewayConfig = devGatewayConfig(config, {
      identitySecret,
      idpUrl: `http://${hostForUrl(config.host)}:${idp.port}`,
      toolUrls,
    });
    // The gateway reads the same in-process store the IdP writes, so a revocation is enforced at once.
    const gateway = await startGateway(gatewayConfig, {
      log: log.child({ component: 'gateway' }),
      revocations,
      tracing,
      host: config.host,
    }).catch(portInUse('GATEWAY_PORT', config.gatewayPort));
    closers.push(() => gateway.close());

    return {
      issuer: idpConfig.issuer,
      signInUrl: `${idpConfig.issuer}${SIGN_IN_PATH}`,
      databaseUrl,
      embeddedDatabase: !config.databaseUrl,
      signingKeyCreated: key.created,
      gatewayUrl: gatewayConfig.publicBaseUrl,
      services: gatewayConfig.services.map((svc) => ({ name: svc.name, url: svc.appIdUri })),
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** A port someone else holds is the most common start-up failure; say which variable moves it. */
function portInUse(variable: string, port: number) {
  return (err: unknown): never => {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new ConfigError(
        variable,
        `port ${port} is already in use (another platform dev?); set ${variable} to move it`,
      );
    }
    throw err;
  };
}

function hostForUrl(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}
