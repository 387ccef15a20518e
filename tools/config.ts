import {
  ConfigError,
  csv,
  databaseUrl,
  type Env,
  httpUrl,
  logLevel,
  metricsPort,
  oneOf,
  optionalString,
  port,
  requiredSecret,
  requiredString,
  secretGiven,
} from '../lib/config.ts';
import { type HostPattern, parseHostPattern } from '../lib/host-patterns.ts';
import { IDENTITY_KEY_PATTERN } from '../lib/identity.ts';
import { type TelemetryConfig, telemetryConfig } from '../lib/telemetry/config.ts';

export const TOOL_SERVICES = ['platform', 'mail', 'deals'] as const;
export type ToolServiceName = (typeof TOOL_SERVICES)[number];

/** Microsoft Graph app-only (client-credentials) settings; present only when all three credentials are set. */
export interface GraphConfig {
  tenantId: string;
  clientId: string;
  clientSecret: string;
  /** Graph API root, e.g. `https://graph.microsoft.com/v1.0` (tests point it at a local stand-in). */
  baseUrl: string;
  tokenUrl: string;
}

export interface ToolServerConfig {
  service: ToolServiceName;
  /** OTEL_* (lib/telemetry/config.ts): traces over OTLP/HTTP; undefined: off, nothing loaded. */
  telemetry?: TelemetryConfig | undefined;
  port: number;
  databaseUrl: string;
  /** This service's identity key (TOOL_IDENTITY_KEY), never the gateway's master secret. */
  identityKey: string;
  /** Lowercased; who may use `as_user_email`. */
  adminEmails: readonly string[];
  /** The web application's Auth.js users table, read for USER_NOT_PROVISIONED. */
  usersTable: string;
  /** How long a user found in the users table is remembered; a deleted user is refused within this time. */
  usersCacheMs: number;
  /** Host-header patterns (`host:*` = any port); empty = no host guard. */
  allowedHosts: readonly HostPattern[];
  /** Allowed `Origin` values; empty = no origin guard. */
  allowedOrigins: readonly string[];
  /** Mail only: Graph delivery; undefined = deliver into the outbox table. */
  graph: GraphConfig | undefined;
  /**
   * Mail only: MAIL_UPSTREAM_CONNECTION, the `entra` connection whose delegated token the gateway sends in
   * `x-platform-upstream-token`: the caller's own mail and events then go to Graph as the caller (`/me`), with or
   * without app-only credentials. Undefined: as before (app-only Graph or the outbox).
   */
  mailConnection: { name: string; graphBaseUrl: string } | undefined;
  logLevel: string;
  /** PLATFORM_ENTITY_ENFORCEMENT=on: tools that know their entities require the token's `ent` grants. */
  entityEnforcement: boolean;
  /** Deals only: DEALS_ENTITY_SQL, the deal id ($1) → its entity key; undefined: `deal:<deal_id>`. */
  dealsEntitySql: string | undefined;
  /** METRICS_PORT: Prometheus text on its own port; undefined: off. */
  metricsPort: number | undefined;
}

// Same bound the IdP uses for its table settings: a plain identifier, optionally schema-qualified.
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

export function isToolService(name: string): name is ToolServiceName {
  return (TOOL_SERVICES as readonly string[]).includes(name);
}

function graphConfig(env: Env): GraphConfig | undefined {
  const names = ['GRAPH_TENANT_ID', 'GRAPH_CLIENT_ID', 'GRAPH_CLIENT_SECRET'] as const;
  // GRAPH_CLIENT_SECRET may be a file (GRAPH_CLIENT_SECRET_FILE); secretGiven counts either.
  const given = names.filter((n) => secretGiven(env, n));
  if (given.length === 0) return undefined;
  // A half-configured Graph would silently fall back to the outbox; refuse it instead.
  const missing = names.find((n) => !secretGiven(env, n));
  if (missing)
    throw new ConfigError(
      missing,
      `is required when ${given.join(', ')} ${given.length > 1 ? 'are' : 'is'} set`,
    );
  const tenantId = requiredString(env, 'GRAPH_TENANT_ID');
  if (!/^[A-Za-z0-9.-]{1,128}$/.test(tenantId)) {
    throw new ConfigError('GRAPH_TENANT_ID', 'must be a tenant id (GUID) or domain name');
  }
  return Object.freeze({
    tenantId,
    clientId: requiredString(env, 'GRAPH_CLIENT_ID'),
    clientSecret: requiredSecret(env, 'GRAPH_CLIENT_SECRET'),
    baseUrl: httpUrl(env, 'GRAPH_BASE_URL') ?? 'https://graph.microsoft.com/v1.0',
    tokenUrl:
      httpUrl(env, 'GRAPH_TOKEN_URL') ?? `https://login.microsoftonline.com/${tenantId}/oauth2/v2.0/token`,
  });
}

/** The same rule as the IdP's connections file and the gateway's `<SERVICE>_UPSTREAM_CONNECTION`. */
const CONNECTION_NAME = /^[a-z][a-z0-9-]{0,31}$/;

function mailConnection(env: Env): ToolServerConfig['mailConnection'] {
  const name = optionalString(env, 'MAIL_UPSTREAM_CONNECTION');
  if (name === undefined) return undefined;
  if (!CONNECTION_NAME.test(name)) {
    throw new ConfigError(
      'MAIL_UPSTREAM_CONNECTION',
      `must be a connection name ([a-z][a-z0-9-]{0,31}), got "${name}"`,
    );
  }
  return Object.freeze({
    name,
    graphBaseUrl: httpUrl(env, 'GRAPH_BASE_URL') ?? 'https://graph.microsoft.com/v1.0',
  });
}

function hostPatterns(env: Env, name: string): HostPattern[] {
  return csv(env, name).map((h) => {
    const p = parseHostPattern(h);
    if (typeof p === 'string') throw new ConfigError(name, p);
    return p;
  });
}

function origins(env: Env, name: string): string[] {
  const out = csv(env, name);
  for (const o of out) {
    let u: URL;
    try {
      u = new URL(o);
    } catch {
      throw new ConfigError(name, `"${o}" is not an origin`);
    }
    if (u.origin !== o.replace(/\/$/, ''))
      throw new ConfigError(name, `"${o}" is not an origin (scheme://host[:port])`);
  }
  return out.map((o) => o.replace(/\/$/, ''));
}

/** `platform tool <name>`'s settings (docs/reference.md § Tool servers, plus the Graph settings in docs/tools.md). */
export function loadToolConfig(name: string, env: Env): ToolServerConfig {
  if (!isToolService(name)) {
    throw new ConfigError(
      'tool',
      `unknown tool server "${name}"; expected one of ${TOOL_SERVICES.join(', ')}`,
    );
  }
  const prefix = name.toUpperCase();
  // First: a SQLite path or any non-PostgreSQL URL is the failure the spec's diagnostics table names.
  const dbUrl = databaseUrl(env);
  const identityKey = requiredSecret(env, 'TOOL_IDENTITY_KEY');
  if (!IDENTITY_KEY_PATTERN.test(identityKey)) {
    throw new ConfigError(
      'TOOL_IDENTITY_KEY',
      `must be the 64-character hex key printed by \`platform identity-key ${name}\``,
    );
  }
  // The master secret would let this server (or whoever takes it over) sign for every other service.
  if (secretGiven(env, 'GATEWAY_IDENTITY_SECRET')) {
    throw new ConfigError(
      optionalString(env, 'GATEWAY_IDENTITY_SECRET') === undefined
        ? 'GATEWAY_IDENTITY_SECRET_FILE'
        : 'GATEWAY_IDENTITY_SECRET',
      'must not be given to a tool server; give it TOOL_IDENTITY_KEY (`platform identity-key <service>`)',
    );
  }
  const usersTable = optionalString(env, 'PLATFORM_AUTHJS_USERS_TABLE') ?? 'users';
  if (!TABLE_NAME.test(usersTable)) {
    throw new ConfigError(
      'PLATFORM_AUTHJS_USERS_TABLE',
      `must be a table name (optionally schema.table), got "${usersTable}"`,
    );
  }
  const toolPort = port(env, `${prefix}_MCP_PORT`, 3000);
  return Object.freeze({
    service: name,
    telemetry: telemetryConfig(env, `platform-tool-${name}`),
    port: toolPort,
    databaseUrl: dbUrl,
    identityKey,
    adminEmails: Object.freeze(csv(env, 'PLATFORM_ADMIN_EMAILS').map((e) => e.toLowerCase())),
    usersTable,
    usersCacheMs: 5_000,
    allowedHosts: Object.freeze(hostPatterns(env, `${prefix}_MCP_ALLOWED_HOSTS`)),
    allowedOrigins: Object.freeze(origins(env, `${prefix}_MCP_ALLOWED_ORIGINS`)),
    graph: name === 'mail' ? graphConfig(env) : undefined,
    mailConnection: name === 'mail' ? mailConnection(env) : undefined,
    logLevel: logLevel(env),
    entityEnforcement: oneOf(env, 'PLATFORM_ENTITY_ENFORCEMENT', ['on', 'off'] as const, 'off') === 'on',
    dealsEntitySql: name === 'deals' ? optionalString(env, 'DEALS_ENTITY_SQL') : undefined,
    metricsPort: metricsPort(env, toolPort),
  });
}
