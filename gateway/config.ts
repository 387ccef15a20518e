import {
  ConfigError,
  csv,
  type Env,
  httpUrl,
  logLevel,
  metricsPort,
  oneOf,
  optionalSecret,
  optionalString,
  port,
  requiredSecret,
  requiredString,
} from '../lib/config.ts';
import { type HostPattern, parseHostPattern } from '../lib/host-patterns.ts';
import { deriveIdentityKey, MIN_IDENTITY_SECRET_LENGTH } from '../lib/identity.ts';
import { redisUrl } from '../lib/redis/config.ts';
import { isServiceName } from '../lib/service-name.ts';
import { type TelemetryConfig, telemetryConfig } from '../lib/telemetry/config.ts';

// The gateway's whole configuration, read from the environment once, checked, and frozen. Variables are the
// ones docs/reference.md § Gateway lists, plus the GATEWAY_* tuning knobs documented in docs/gateway.md.

export interface ServiceConfig {
  name: string;
  /** Upstream origins (one per tool server replica), e.g. `http://deals-1:3000`; requests are spread over them. */
  upstreamOrigins: readonly string[];
  /** Path the upstreams' base URLs carry (the same for all), prepended to the forwarded path ('' for none). */
  upstreamBasePath: string;
  appIdUri: string;
  /** Entra client id of the connector app; undefined: the Entra path is off for this service. */
  entraClientId: string | undefined;
  allowedHosts: readonly HostPattern[];
  allowedOrigins: ReadonlySet<string>;
  /** HS256 secret for the service's own tokens; undefined: that path is off. */
  sharedSecret: Buffer | undefined;
  /** The key the identity headers for this service are signed with (derived from GATEWAY_IDENTITY_SECRET). */
  identityKey: string;
  /** `mcp:<service>`: the platform scope this service requires. */
  platformScope: string;
  /** `{base_url}/<service>/.well-known/oauth-protected-resource` (the WWW-Authenticate resource_metadata). */
  resourceMetadataUrl: string;
  /**
   * `<SERVICE>_UPSTREAM_CONNECTION`: the user's connection (a name in the IdP's connections file) whose upstream
   * token every request carries (gateway/upstream-auth/); undefined: none.
   */
  upstreamConnection: string | undefined;
  /**
   * `<SERVICE>_UPSTREAM_KIND`: `tool` (one of our tool servers: signed identity headers, the upstream token in
   * `x-platform-upstream-token`) or `remote` (a third-party MCP server: its own Host, `Authorization: Bearer` with
   * the upstream token, no `x-platform-*` header).
   */
  upstreamKind: UpstreamKind;
  /**
   * A `remote` upstream whose URL has a path: that path (as written) is its MCP endpoint, where
   * `/<service>/mcp` is sent. Undefined (a tool server, or a remote URL without a path): the prefix is kept.
   */
  remoteEndpoint: string | undefined;
}

export type UpstreamKind = 'tool' | 'remote';

/** The gateway as a client of the platform IdP's token endpoint (RFC 8693 exchanges). */
export interface TokenExchangeConfig {
  /** GATEWAY_TOKEN_URL; default `{PLATFORM_ISSUER}/oauth/token`. */
  tokenUrl: string;
  /** Always `platform-gateway`: the IdP's client for the gateway. */
  clientId: string;
  /** GATEWAY_CLIENT_SECRET (or _FILE): HTTP Basic at the token endpoint. */
  clientSecret: string;
}

export interface PlatformTrust {
  issuer: string;
  audience: string;
  /** undefined: taken from the issuer's discovery document (`jwks_uri`). */
  jwksUrl: string | undefined;
}

export interface EntraTrust {
  tenantId: string;
  v2Issuer: string;
  v1Issuer: string;
  v2JwksUrl: string;
  v1JwksUrl: string;
}

export type RevocationMode = 'fail-open' | 'fail-closed';

export interface GatewayConfig {
  port: number;
  /** OTEL_* (lib/telemetry/config.ts): traces over OTLP/HTTP; undefined: off, nothing loaded. */
  telemetry?: TelemetryConfig | undefined;
  publicBaseUrl: string;
  services: readonly ServiceConfig[];
  platform: PlatformTrust | undefined;
  entra: EntraTrust | undefined;
  redisUrl: string | undefined;
  identitySecret: string;
  logLevel: string;
  /** METRICS_PORT: Prometheus text on its own port; undefined: off. */
  metricsPort: number | undefined;
  revocationMode: RevocationMode;
  /** Minimum interval between forced JWKS refetches (unknown kid) per issuer. */
  jwksCooldownMs: number;
  tokenCacheSize: number;
  /** GATEWAY_MAX_BODY_BYTES: every request body is read whole up to this (413 beyond). */
  maxBodyBytes: number;
  /** GATEWAY_BODY_TIMEOUT_MS: a body not read whole by then gets 408. */
  bodyTimeoutMs: number;
  maxHeaderBytes: number;
  /** GATEWAY_HEADERS_TIMEOUT_MS: a request head not whole by then gets 408 and the connection closed. */
  headersTimeoutMs: number;
  upstreamHeadersTimeoutMs: number;
  /** How long a request whose body is still untouched is retried while the upstream refuses connections. */
  upstreamRetryMs: number;
  shutdownGraceMs: number;
  /** The per-tool policy (YAML); undefined: every caller with a service's scope may call all its tools. */
  policyFile: string | undefined;
  /** GATEWAY_DPOP_NONCE=on: DPoP proofs must carry a gateway nonce (RFC 9449 §9); default off. */
  dpopNonce: boolean;
  /** Set when a service has an upstream connection: how the gateway exchanges platform tokens. */
  exchange: TokenExchangeConfig | undefined;
}

/** The IdP's client id for the gateway (it exists when the IdP has PLATFORM_GATEWAY_CLIENT_SECRET). */
export const GATEWAY_CLIENT_ID = 'platform-gateway';
/** As the IdP requires of PLATFORM_GATEWAY_CLIENT_SECRET: the same value on both sides. */
const MIN_CLIENT_SECRET_LENGTH = 32;
/** A connection's name, as the IdP's connections file allows it. */
const CONNECTION_NAME = /^[a-z][a-z0-9-]{0,31}$/;

const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const TENANT = /^[A-Za-z0-9][A-Za-z0-9.-]{0,253}$/;

export function envPrefix(service: string): string {
  return service.toUpperCase().replace(/-/g, '_');
}

function number(env: Env, name: string, fallback: number, opts: { min: number; max: number }): number {
  const v = optionalString(env, name);
  if (v === undefined) return fallback;
  if (!/^\d+(\.\d+)?$/.test(v)) throw new ConfigError(name, `must be a non-negative number, got "${v}"`);
  const n = Number(v);
  if (n < opts.min || n > opts.max)
    throw new ConfigError(name, `must be between ${opts.min} and ${opts.max}, got ${v}`);
  return n;
}

function integer(env: Env, name: string, fallback: number, opts: { min: number; max: number }): number {
  const n = number(env, name, fallback, opts);
  if (!Number.isInteger(n)) throw new ConfigError(name, `must be a whole number, got ${n}`);
  return n;
}

function hostPattern(name: string, value: string): HostPattern {
  const p = parseHostPattern(value);
  if (typeof p === 'string') throw new ConfigError(name, p);
  return p;
}

function origin(name: string, value: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigError(name, `"${value}" is not an origin (scheme://host[:port])`);
  }
  if (u.origin === 'null' || (u.pathname !== '/' && u.pathname !== '') || u.search || u.hash) {
    throw new ConfigError(name, `"${value}" is not an origin (scheme://host[:port], no path)`);
  }
  return u.origin;
}

function loadService(env: Env, name: string, base: URL, identitySecret: string): ServiceConfig {
  const P = envPrefix(name);
  const upstreamVar = `${P}_MCP_UPSTREAM`;
  requiredString(env, upstreamVar);
  // Several replicas of one tool server: a comma-separated list, all with the same base path (the identity
  // signature covers the path the tool server sees, so it must not depend on which replica answers).
  const upstreams = csv(env, upstreamVar).map((value) => {
    const u = new URL(httpUrl({ [upstreamVar]: value }, upstreamVar, value)!);
    if (u.username || u.password) throw new ConfigError(upstreamVar, 'must not carry credentials');
    return {
      origin: u.origin,
      basePath: u.pathname === '/' ? '' : u.pathname.replace(/\/$/, ''),
      // As written (httpUrl drops a trailing slash): a remote MCP endpoint may need it.
      rawPath: new URL(value).pathname,
    };
  });
  if (upstreams.length === 0) throw new ConfigError(upstreamVar, 'is required');
  const basePath = upstreams[0]!.basePath;
  if (upstreams.some((x) => x.basePath !== basePath)) {
    throw new ConfigError(upstreamVar, 'all upstreams of a service must have the same path');
  }
  const upstreamOrigins = [...new Set(upstreams.map((x) => x.origin))];
  if (upstreamOrigins.length !== upstreams.length) {
    throw new ConfigError(upstreamVar, 'names an upstream twice');
  }
  const appIdUri =
    optionalString(env, `${P}_MCP_APP_ID_URI`) ??
    `${base.origin}${base.pathname.replace(/\/$/, '')}/${name}/mcp`;
  const clientId = optionalString(env, `${P}_MCP_CLIENT_ID`);
  if (clientId !== undefined && !GUID.test(clientId)) {
    throw new ConfigError(
      `${P}_MCP_CLIENT_ID`,
      `must be a GUID (the Entra application's client id), got "${clientId}"`,
    );
  }
  const hostsVar = `${P}_MCP_ALLOWED_HOSTS`;
  const hosts = csv(env, hostsVar, ['localhost:*', '127.0.0.1:*', base.host]).map((h) =>
    hostPattern(hostsVar, h),
  );
  const originsVar = `${P}_MCP_ALLOWED_ORIGINS`;
  const origins = csv(env, originsVar, [base.origin]).map((o) => origin(originsVar, o));
  const secretVar = `${P}_MCP_SHARED_SECRET`;
  const secret = optionalSecret(env, secretVar);
  // RFC 7518 §3.2: an HS256 key must be at least as long as the hash output.
  if (secret !== undefined && Buffer.byteLength(secret) < 32) {
    throw new ConfigError(secretVar, 'must be at least 32 bytes (RFC 7518 §3.2)');
  }
  const prefix = `${base.origin}${base.pathname.replace(/\/$/, '')}/${name}`;
  const connectionVar = `${P}_UPSTREAM_CONNECTION`;
  const upstreamConnection = optionalString(env, connectionVar);
  if (upstreamConnection !== undefined && !CONNECTION_NAME.test(upstreamConnection)) {
    throw new ConfigError(
      connectionVar,
      `must be a connection name ([a-z][a-z0-9-]{0,31}, as in the IdP's connections file), got "${upstreamConnection}"`,
    );
  }
  const upstreamKind = oneOf(env, `${P}_UPSTREAM_KIND`, ['tool', 'remote'] as const, 'tool');
  if (upstreamKind === 'remote' && upstreams.some((x) => x.rawPath !== upstreams[0]!.rawPath)) {
    throw new ConfigError(upstreamVar, 'all upstreams of a service must have the same path');
  }
  return Object.freeze({
    name,
    upstreamOrigins: Object.freeze(upstreamOrigins),
    upstreamBasePath: basePath,
    appIdUri,
    entraClientId: clientId?.toLowerCase(),
    allowedHosts: Object.freeze(hosts),
    allowedOrigins: new Set(origins),
    sharedSecret: secret === undefined ? undefined : Buffer.from(secret),
    identityKey: deriveIdentityKey(identitySecret, name),
    platformScope: `mcp:${name}`,
    resourceMetadataUrl: `${prefix}/.well-known/oauth-protected-resource`,
    upstreamConnection,
    upstreamKind,
    remoteEndpoint: upstreamKind === 'remote' && basePath !== '' ? upstreams[0]!.rawPath : undefined,
  });
}

/**
 * The exchange settings, required as soon as one service names an upstream connection: only platform tokens can
 * be exchanged (so PLATFORM_ISSUER), and the IdP knows the gateway by its client secret.
 */
function loadExchange(
  env: Env,
  services: readonly ServiceConfig[],
  platform: PlatformTrust | undefined,
): TokenExchangeConfig | undefined {
  const connected = services.find((s) => s.upstreamConnection !== undefined);
  if (connected === undefined) return undefined;
  const because = `${envPrefix(connected.name)}_UPSTREAM_CONNECTION is set`;
  if (platform === undefined) {
    throw new ConfigError(
      'PLATFORM_ISSUER',
      `is required when ${because} (only platform tokens are exchanged)`,
    );
  }
  const clientSecret = optionalSecret(env, 'GATEWAY_CLIENT_SECRET');
  if (clientSecret === undefined) {
    throw new ConfigError(
      'GATEWAY_CLIENT_SECRET',
      `is required when ${because} (or GATEWAY_CLIENT_SECRET_FILE; the IdP's PLATFORM_GATEWAY_CLIENT_SECRET)`,
    );
  }
  if (clientSecret.length < MIN_CLIENT_SECRET_LENGTH) {
    throw new ConfigError(
      'GATEWAY_CLIENT_SECRET',
      `must be at least ${MIN_CLIENT_SECRET_LENGTH} characters (the IdP's PLATFORM_GATEWAY_CLIENT_SECRET)`,
    );
  }
  return Object.freeze({
    tokenUrl: httpUrl(env, 'GATEWAY_TOKEN_URL') ?? `${platform.issuer.replace(/\/$/, '')}/oauth/token`,
    clientId: GATEWAY_CLIENT_ID,
    clientSecret,
  });
}

function loadPlatform(env: Env): PlatformTrust | undefined {
  const issuer = optionalString(env, 'PLATFORM_ISSUER');
  const jwksUrl = httpUrl(env, 'PLATFORM_JWKS_URL');
  const audience = optionalString(env, 'PLATFORM_AUDIENCE');
  if (issuer === undefined && jwksUrl === undefined && audience === undefined) return undefined;
  if (issuer === undefined)
    throw new ConfigError(
      'PLATFORM_ISSUER',
      'is required when PLATFORM_AUDIENCE or PLATFORM_JWKS_URL is set',
    );
  if (audience === undefined)
    throw new ConfigError('PLATFORM_AUDIENCE', 'is required when PLATFORM_ISSUER is set');
  // The issuer is compared as a string with the token's `iss`, exactly as the IdP writes it (no trailing slash).
  return { issuer: httpUrl(env, 'PLATFORM_ISSUER')!, audience, jwksUrl };
}

function loadEntra(env: Env): EntraTrust | undefined {
  const tenantId = optionalString(env, 'IDP_TENANT_ID');
  const override = httpUrl(env, 'ENTRA_JWKS_URL');
  if (tenantId === undefined) {
    if (override !== undefined) throw new ConfigError('ENTRA_JWKS_URL', 'is set but IDP_TENANT_ID is not');
    return undefined;
  }
  if (!TENANT.test(tenantId)) throw new ConfigError('IDP_TENANT_ID', `is not a tenant id, got "${tenantId}"`);
  return {
    tenantId,
    v2Issuer: `https://login.microsoftonline.com/${tenantId}/v2.0`,
    v1Issuer: `https://sts.windows.net/${tenantId}/`,
    v2JwksUrl: override ?? `https://login.microsoftonline.com/${tenantId}/discovery/v2.0/keys`,
    v1JwksUrl: override ?? `https://login.microsoftonline.com/${tenantId}/discovery/keys`,
  };
}

/**
 * Reads and checks every gateway variable; a bad value throws ConfigError naming it, before anything listens.
 * `redisRequired: false` is for `platform dev`, which gives the gateway its in-process revocation store.
 */
export function loadGatewayConfig(env: Env, opts: { redisRequired?: boolean } = {}): GatewayConfig {
  const publicBaseUrl = httpUrl(env, 'PUBLIC_BASE_URL', requiredString(env, 'PUBLIC_BASE_URL'))!;
  const base = new URL(publicBaseUrl);
  const names = csv(env, 'GATEWAY_SERVICES');
  if (names.length === 0)
    throw new ConfigError('GATEWAY_SERVICES', 'is required (comma-separated service names)');
  const seen = new Set<string>();
  for (const n of names) {
    if (!isServiceName(n))
      throw new ConfigError('GATEWAY_SERVICES', `"${n}" is not a service name ([a-z][a-z0-9-]*)`);
    if (n === 'health' || n === '.well-known')
      throw new ConfigError('GATEWAY_SERVICES', `"${n}" is a reserved path`);
    if (seen.has(n)) throw new ConfigError('GATEWAY_SERVICES', `"${n}" is listed twice`);
    seen.add(n);
  }
  const identitySecret = requiredSecret(env, 'GATEWAY_IDENTITY_SECRET');
  // Every service key is derived from it: a short secret would make all of them guessable offline.
  if (identitySecret.length < MIN_IDENTITY_SECRET_LENGTH) {
    throw new ConfigError(
      'GATEWAY_IDENTITY_SECRET',
      `must be at least ${MIN_IDENTITY_SECRET_LENGTH} characters (openssl rand -base64 48)`,
    );
  }
  const services = names.map((n) => loadService(env, n, base, identitySecret));
  const redis = redisUrl(env);
  if (opts.redisRequired !== false && redis === undefined) {
    throw new ConfigError(
      'REDIS_URL',
      'is required (JWKS cache, denylist and revocation channel); or REDIS_SENTINELS or REDIS_CLUSTER_NODES',
    );
  }
  const platform = loadPlatform(env);
  const entra = loadEntra(env);
  for (const s of services) {
    if (s.entraClientId !== undefined && entra === undefined) {
      throw new ConfigError(`${envPrefix(s.name)}_MCP_CLIENT_ID`, 'is set but IDP_TENANT_ID is not');
    }
  }
  const exchange = loadExchange(env, services, platform);
  const gatewayPort = port(env, 'GATEWAY_PORT', 8080);
  return Object.freeze({
    port: gatewayPort,
    telemetry: telemetryConfig(env, 'platform-gateway'),
    publicBaseUrl,
    services: Object.freeze(services),
    platform: platform && Object.freeze(platform),
    entra: entra && Object.freeze(entra),
    redisUrl: redis,
    identitySecret,
    logLevel: logLevel(env),
    metricsPort: metricsPort(env, gatewayPort),
    revocationMode: oneOf(env, 'GATEWAY_REVOCATION_MODE', ['fail-open', 'fail-closed'] as const, 'fail-open'),
    jwksCooldownMs: number(env, 'GATEWAY_JWKS_COOLDOWN_SECONDS', 30, { min: 0, max: 3600 }) * 1000,
    tokenCacheSize: integer(env, 'GATEWAY_TOKEN_CACHE_SIZE', 10_000, { min: 0, max: 1_000_000 }),
    // Bodies are held in memory whole (to hash them into the identity signature): the bound keeps that cheap.
    maxBodyBytes: integer(env, 'GATEWAY_MAX_BODY_BYTES', 1024 * 1024, { min: 1024, max: 64 * 1024 * 1024 }),
    bodyTimeoutMs: integer(env, 'GATEWAY_BODY_TIMEOUT_MS', 10_000, { min: 100, max: 600_000 }),
    maxHeaderBytes: integer(env, 'GATEWAY_MAX_HEADER_BYTES', 16 * 1024, { min: 4096, max: 256 * 1024 }),
    headersTimeoutMs: integer(env, 'GATEWAY_HEADERS_TIMEOUT_MS', 10_000, { min: 1000, max: 120_000 }),
    upstreamHeadersTimeoutMs:
      number(env, 'GATEWAY_UPSTREAM_HEADERS_TIMEOUT_SECONDS', 120, { min: 1, max: 3600 }) * 1000,
    upstreamRetryMs: number(env, 'GATEWAY_UPSTREAM_RETRY_SECONDS', 5, { min: 0, max: 60 }) * 1000,
    shutdownGraceMs: number(env, 'GATEWAY_SHUTDOWN_GRACE_SECONDS', 10, { min: 0, max: 600 }) * 1000,
    policyFile: optionalString(env, 'GATEWAY_POLICY_FILE'),
    dpopNonce: oneOf(env, 'GATEWAY_DPOP_NONCE', ['on', 'off'] as const, 'off') === 'on',
    exchange,
  });
}
