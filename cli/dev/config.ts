import { join, resolve } from 'node:path';
import { type GatewayConfig, loadGatewayConfig } from '../../gateway/config.ts';
import { type IdpConfig, loadIdpConfig } from '../../idp/config.ts';
import {
  ConfigError,
  type Env,
  httpUrl,
  logLevel,
  normaliseDatabaseUrl,
  oneOf,
  optionalString,
  port,
  secret,
  secretGiven,
} from '../../lib/config.ts';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { redisUrl } from '../../lib/redis/config.ts';
import { type TelemetryConfig, telemetryConfig } from '../../lib/telemetry/config.ts';
import {
  loadToolConfig,
  TOOL_SERVICES,
  type ToolServerConfig,
  type ToolServiceName,
} from '../../tools/config.ts';

/**
 * `platform dev`'s settings. Everything has a development default; the component variables keep their
 * contract names (IDP_PORT, GATEWAY_PORT, <SERVICE>_MCP_PORT, DATABASE_URL, REDIS_URL, …) so a value that
 * works for `platform idp` works here too. The PLATFORM_DEV_* variables are dev's own (docs/cli.md).
 */
export interface DevConfig {
  /** OTEL_* (lib/telemetry/config.ts), service `platform-dev`: one tracer for the whole stack; undefined: off. */
  telemetry?: TelemetryConfig | undefined;
  /** PLATFORM_DEV_DATA_DIR: the embedded database and the signing key live here. */
  dataDir: string;
  pgliteDir: string;
  signingKeyPath: string;
  /**
   * PLATFORM_DEV_SESSION (`platform dev --session`): the kind of Auth.js session the sign-in page makes, `database`
   * (a `sessions` row) or `jwt` (an encrypted JWT-strategy cookie, read with PLATFORM_AUTHJS_SECRET).
   */
  session: 'database' | 'jwt';
  /** Where the jwt mode's AUTH_SECRET is kept (generated on first use) unless PLATFORM_AUTHJS_SECRET is set. */
  authjsSecretPath: string;
  /** PLATFORM_AUTHJS_SECRET (or _FILE) is set: the jwt mode seals with its first secret instead. */
  authjsSecretGiven: boolean;
  /** PLATFORM_DEV_HOST: every listener binds here; loopback by default since the sign-in page trusts anyone. */
  host: string;
  /** PLATFORM_DEV_PG_PORT: the embedded database's wire-protocol port (0: any free port). */
  embeddedPostgresPort: number;
  /** DATABASE_URL: a real server instead of the embedded one. */
  databaseUrl: string | undefined;
  /** REDIS_URL: real Redis for revocations instead of the in-process store. */
  redisUrl: string | undefined;
  idpPort: number;
  issuer: string;
  audience: string;
  gatewayPort: number;
  publicBaseUrl: string;
  services: readonly ToolServiceName[];
  toolPorts: Readonly<Record<ToolServiceName, number>>;
  logLevel: string;
  /**
   * PLATFORM_ADMIN_EMAILS: who administers the dev stack. Default: the development user the sign-in page
   * offers, so `platform admin …` works against `make dev` with nothing set.
   */
  adminEmails: string;
  /** PATH, to print the banner's command lines the way this shell will run them. */
  searchPath: string;
  /** The environment as given, for the component loaders below (dev's values are laid over it). */
  env: Env;
}

/** The development user: pre-filled on the sign-in page, and an administrator unless PLATFORM_ADMIN_EMAILS says otherwise. */
export const DEV_USER_EMAIL = 'dev@example.com';

const DEFAULT_TOOL_PORTS: Readonly<Record<ToolServiceName, number>> = {
  platform: 3001,
  mail: 3002,
  deals: 3003,
};

export function loadDevConfig(env: Env, cwd: string): DevConfig {
  const dataDir = resolve(cwd, optionalString(env, 'PLATFORM_DEV_DATA_DIR') ?? '.data');
  const idpPort = port(env, 'IDP_PORT', 4000);
  const gatewayPort = port(env, 'GATEWAY_PORT', 8080);
  if (idpPort === 0 || gatewayPort === 0) {
    // The issuer and the public base URL carry the port, so it must be known before anything listens.
    throw new ConfigError(
      idpPort === 0 ? 'IDP_PORT' : 'GATEWAY_PORT',
      'must be a fixed port in platform dev',
    );
  }
  const publicBaseUrl = httpUrl(env, 'PUBLIC_BASE_URL') ?? `http://localhost:${gatewayPort}`;
  const databaseUrl = secret(env, 'DATABASE_URL');
  const toolPorts = Object.fromEntries(
    TOOL_SERVICES.map((s) => [s, port(env, `${s.toUpperCase()}_MCP_PORT`, DEFAULT_TOOL_PORTS[s])]),
  ) as Record<ToolServiceName, number>;
  return Object.freeze({
    telemetry: telemetryConfig(env, 'platform-dev'),
    dataDir,
    pgliteDir: join(dataDir, 'pglite'),
    signingKeyPath: join(dataDir, 'dev-signing-key.pem'),
    session: oneOf(env, 'PLATFORM_DEV_SESSION', ['database', 'jwt'] as const, 'database'),
    authjsSecretPath: join(dataDir, 'dev-authjs-secret'),
    authjsSecretGiven: secretGiven(env, 'PLATFORM_AUTHJS_SECRET'),
    host: optionalString(env, 'PLATFORM_DEV_HOST') ?? '127.0.0.1',
    embeddedPostgresPort: port(env, 'PLATFORM_DEV_PG_PORT', 0),
    databaseUrl:
      databaseUrl === undefined ? undefined : normaliseDatabaseUrl(databaseUrl.value, databaseUrl.from),
    redisUrl: redisUrl(env),
    idpPort,
    issuer: httpUrl(env, 'PLATFORM_OIDC_ISSUER') ?? `http://localhost:${idpPort}`,
    audience: optionalString(env, 'PLATFORM_AUDIENCE') ?? publicBaseUrl,
    gatewayPort,
    publicBaseUrl,
    services: TOOL_SERVICES,
    toolPorts: Object.freeze(toolPorts),
    logLevel: logLevel(env),
    adminEmails: optionalString(env, 'PLATFORM_ADMIN_EMAILS') ?? DEV_USER_EMAIL,
    searchPath: optionalString(env, 'PATH') ?? '',
    env,
  });
}

/** The IdP's configuration for dev: its own loader, so the same checks apply, over dev's values. */
export function devIdpConfig(
  dev: DevConfig,
  runtime: { databaseUrl: string; privateKey: string; authjsSecret?: string },
): IdpConfig {
  return loadIdpConfig(
    {
      PLATFORM_SERVICES: dev.services.join(','),
      ...dev.env,
      PLATFORM_ADMIN_EMAILS: dev.adminEmails,
      IDP_PORT: String(dev.idpPort),
      PLATFORM_OIDC_ISSUER: dev.issuer,
      PUBLIC_BASE_URL: dev.publicBaseUrl,
      PLATFORM_AUDIENCE: dev.audience,
      PLATFORM_OIDC_PRIVATE_KEY: runtime.privateKey,
      PLATFORM_OIDC_PRIVATE_KEY_FILE: undefined,
      DATABASE_URL: runtime.databaseUrl,
      DATABASE_URL_FILE: undefined,
      ...(runtime.authjsSecret === undefined
        ? {}
        : { PLATFORM_AUTHJS_SECRET: runtime.authjsSecret, PLATFORM_AUTHJS_SECRET_FILE: undefined }),
    },
    { redisRequired: false },
  );
}

/**
 * One tool server's configuration for dev: its own identity key, derived from the per-run secret the gateway
 * holds (the tool server never gets the secret itself, as in a deployment).
 */
export function devToolConfig(
  dev: DevConfig,
  name: ToolServiceName,
  runtime: { databaseUrl: string; identitySecret: string },
): ToolServerConfig {
  return loadToolConfig(name, {
    ...dev.env,
    PLATFORM_ADMIN_EMAILS: dev.adminEmails,
    [`${name.toUpperCase()}_MCP_PORT`]: String(dev.toolPorts[name]),
    DATABASE_URL: runtime.databaseUrl,
    DATABASE_URL_FILE: undefined,
    GATEWAY_IDENTITY_SECRET: undefined,
    GATEWAY_IDENTITY_SECRET_FILE: undefined,
    TOOL_IDENTITY_KEY: deriveIdentityKey(runtime.identitySecret, name),
    TOOL_IDENTITY_KEY_FILE: undefined,
  });
}

/**
 * The gateway for dev: fronts the tool servers at the ports they actually got, trusts the dev issuer (key set
 * fetched from the IdP's loopback address, which is where it listens), keyed by the per-run identity secret.
 */
export function devGatewayConfig(
  dev: DevConfig,
  runtime: { identitySecret: string; idpUrl: string; toolUrls: Readonly<Record<string, string>> },
): GatewayConfig {
  const upstreams = Object.fromEntries(
    Object.entries(runtime.toolUrls).map(([name, url]) => [`${name.toUpperCase()}_MCP_UPSTREAM`, url]),
  );
  return loadGatewayConfig(
    {
      PLATFORM_JWKS_URL: `${runtime.idpUrl}/.well-known/jwks.json`,
      ...dev.env,
      ...upstreams,
      GATEWAY_PORT: String(dev.gatewayPort),
      PUBLIC_BASE_URL: dev.publicBaseUrl,
      GATEWAY_SERVICES: Object.keys(runtime.toolUrls).join(','),
      PLATFORM_ISSUER: dev.issuer,
      PLATFORM_AUDIENCE: dev.audience,
      GATEWAY_IDENTITY_SECRET: runtime.identitySecret,
      GATEWAY_IDENTITY_SECRET_FILE: undefined,
    },
    { redisRequired: false },
  );
}
