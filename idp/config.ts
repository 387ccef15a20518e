import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import {
  ConfigError,
  csv,
  databaseUrl,
  duration,
  type Env,
  httpUrl,
  integer,
  logLevel,
  metricsPort,
  oneOf,
  optionalSecret,
  optionalString,
  port,
  requiredString,
  secretGiven,
} from '../lib/config.ts';
import { type HostPattern, parseHostPattern } from '../lib/host-patterns.ts';
import { redisUrl } from '../lib/redis/config.ts';
import { isServiceName } from '../lib/service-name.ts';
import { type TelemetryConfig, telemetryConfig } from '../lib/telemetry/config.ts';
import type { MetadataClient } from './cimd/metadata.ts';
import { loadPinnedDocuments } from './cimd/pinned.ts';
import { type ConnectionConfig, readConnectionsFile } from './connections/file.ts';

export interface IdpConfig {
  port: number;
  /** OTEL_* (lib/telemetry/config.ts): traces over OTLP/HTTP; undefined: off, nothing loaded. */
  telemetry?: TelemetryConfig | undefined;
  issuer: string;
  /**
   * PLATFORM_OIDC_PRIVATE_KEY as given: PEM, a JWK, or a JSON array of JWKs (parsed by tokens/keys.ts).
   * Required unless `keyRotation` is set; with rotation it is imported once into an empty key table.
   */
  privateKey: string | undefined;
  /** PLATFORM_KEY_ROTATION=auto: signing keys kept in Postgres and rotated on a schedule (idp/keys/). */
  keyRotation: KeyRotationConfig | undefined;
  audience: string;
  services: string[];
  /** Exact non-loopback redirect URIs dynamic registration accepts (the connector callbacks). */
  allowedRedirectUris: string[];
  /**
   * The one web-session cookie read: `__Secure-authjs.session-token` for an https issuer, the plain
   * `authjs.session-token` for http, or PLATFORM_SESSION_COOKIE. Never both: a plain-named cookie can be
   * planted by any subdomain or plain-http page, the __Secure- one only over https.
   */
  sessionCookie: string;
  loginUrl: string;
  /** PUBLIC_BASE_URL when set: RFC 8707 resources must then be on this origin. */
  publicBaseUrl: string | undefined;
  databaseUrl: string;
  redisUrl: string | undefined;
  logLevel: string;
  /** METRICS_PORT: Prometheus text on its own port; undefined: off. */
  metricsPort: number | undefined;
  /** Client ID Metadata Documents: hosts allowed to serve them (empty: any public host), an extra CA (PEM). */
  /** `pinned`: PLATFORM_CIMD_PINNED_DIR's documents by client_id (served from there, never fetched). */
  cimd: {
    allowedHosts: readonly HostPattern[];
    ca: string | undefined;
    pinned: ReadonlyMap<string, MetadataClient>;
  };
  /** PLATFORM_TRUSTED_ISSUERS_FILE (idp/trusted-issuers): read at start-up and on SIGHUP; undefined: none. */
  trustedIssuersFile: string | undefined;
  /** `open`: every user gets every service; `managed`: only services granted to the user's email or roles. */
  entitlements: 'open' | 'managed';
  /** PLATFORM_ROLES_SQL: a query taking the user id as $1, one column of role names; undefined: no roles. */
  rolesSql: string | undefined;
  /** PLATFORM_ENT_MAX: the most entities an access token's `ent` names (beyond: `ent_overflow`). */
  entMax: number;
  /** PLATFORM_ADMIN_EMAILS, lowercased: who may be granted `platform:admin` and use the admin API. */
  adminEmails: ReadonlySet<string>;
  /** PLATFORM_RATE_LIMITS over the defaults (docs/idp.md § Rate limits). */
  rateLimits: RateLimits;
  /** PLATFORM_TRUSTED_PROXIES: peers whose X-Forwarded-For names the client address. */
  trustedProxies: readonly string[];
  /**
   * PLATFORM_REFRESH_RETRY_SECONDS: how long after its first rotation a refresh token may be presented again and
   * rotated into a sibling chain (concurrent processes of one client; docs/idp.md § Token endpoint).
   */
  refreshRetrySeconds: number;
  /** PLATFORM_ADMIN_REQUIRE_DPOP: `on`: `platform:admin` only in DPoP-bound access tokens (docs/idp.md § DPoP). */
  adminRequireDpop: boolean;
  /** PLATFORM_DPOP_NONCE: `on`: every token request's proof must carry a server nonce (RFC 9449 §8). */
  dpopNonce: boolean;
  /**
   * PLATFORM_AUTHJS_SECRET, split on commas (newest first): the web application's AUTH_SECRET, so its Auth.js
   * JWT-strategy session cookie counts as a web session (session/authjs-jwt.ts). Empty: database sessions only.
   */
  authjsSecrets: readonly string[];
  /** PLATFORM_CONNECTIONS_FILE (idp/connections): undefined when not set. */
  connections: ConnectionsConfig | undefined;
  /**
   * PLATFORM_GATEWAY_CLIENT_SECRET (or _FILE): the secret of the gateway's own client `platform-gateway`, which
   * exchanges users' tokens for their connections (idp/token-exchange); undefined: no such client.
   */
  gatewayClientSecret: string | undefined;
  authjs: {
    usersTable: string;
    accountsTable: string;
    sessionsTable: string;
    /** The `accounts.provider` whose providerAccountId is the user's `sub` (the Entra object id). */
    subjectProvider: string;
  };
}

export interface ConnectionsConfig {
  /** The file, re-read on SIGHUP. */
  file: string;
  /** The file's connections as read at start-up. */
  list: readonly ConnectionConfig[];
  /**
   * The secret the stored upstream grants are sealed under: PLATFORM_CONNECTIONS_KEY, else the key-rotation
   * encryption key (PLATFORM_KEY_ENCRYPTION_KEY) under a label of its own.
   */
  sealingSecret: string;
}

export interface KeyRotationConfig {
  /** PLATFORM_KEY_ENCRYPTION_KEY: the secret the keys' private parts are encrypted under (HKDF, AES-256-GCM). */
  encryptionKey: string;
  /** PLATFORM_KEY_LIFETIME: how long a key signs before the next one takes over. */
  lifetimeSeconds: number;
  /** PLATFORM_KEY_PUBLISH_AHEAD: how long a new key is published before it signs. */
  publishAheadSeconds: number;
}

/** The key set's Cache-Control max-age with static keys (with rotation it follows the publish-ahead margin). */
export const STATIC_JWKS_MAX_AGE_SECONDS = 300;
/** The shortest publish-ahead margin accepted: room for a poll and a key-set cache life below it. */
export const MIN_PUBLISH_AHEAD_SECONDS = 4;
export const MIN_ENCRYPTION_KEY_LENGTH = 32;
export const MIN_GATEWAY_CLIENT_SECRET_LENGTH = 32;

/**
 * PLATFORM_KEY_ROTATION and its variables. The margins are checked here so a schedule that could let a gateway
 * meet an unknown kid never starts: the key set is cached at most publish-ahead / 4 (idp/keys/schedule.ts), and
 * a key must sign for longer than it is announced.
 */
function keyRotation(env: Env): KeyRotationConfig | undefined {
  const mode = oneOf(env, 'PLATFORM_KEY_ROTATION', ['off', 'auto'] as const, 'off');
  if (mode === 'off') {
    for (const name of [
      'PLATFORM_KEY_ENCRYPTION_KEY',
      'PLATFORM_KEY_LIFETIME',
      'PLATFORM_KEY_PUBLISH_AHEAD',
    ]) {
      const given =
        name === 'PLATFORM_KEY_ENCRYPTION_KEY'
          ? secretGiven(env, name)
          : optionalString(env, name) !== undefined;
      if (given) throw new ConfigError(name, 'is set but PLATFORM_KEY_ROTATION is not auto');
    }
    return undefined;
  }
  const encryptionKey = optionalSecret(env, 'PLATFORM_KEY_ENCRYPTION_KEY');
  if (encryptionKey === undefined)
    throw new ConfigError('PLATFORM_KEY_ENCRYPTION_KEY', 'is required when PLATFORM_KEY_ROTATION=auto');
  if (encryptionKey.length < MIN_ENCRYPTION_KEY_LENGTH)
    throw new ConfigError(
      'PLATFORM_KEY_ENCRYPTION_KEY',
      `is ${encryptionKey.length} characters; use at least ${MIN_ENCRYPTION_KEY_LENGTH} random ones (openssl rand -base64 48)`,
    );
  if (new Set(encryptionKey).size < 8)
    throw new ConfigError('PLATFORM_KEY_ENCRYPTION_KEY', 'repeats too few characters to be a random secret');
  const publishAheadSeconds = duration(env, 'PLATFORM_KEY_PUBLISH_AHEAD', 2 * 3600, {
    min: MIN_PUBLISH_AHEAD_SECONDS,
    max: 30 * 86_400,
  });
  const lifetimeSeconds = duration(env, 'PLATFORM_KEY_LIFETIME', 30 * 86_400, { min: 2, max: 3650 * 86_400 });
  if (lifetimeSeconds <= publishAheadSeconds)
    throw new ConfigError(
      'PLATFORM_KEY_LIFETIME',
      `(${lifetimeSeconds} s) must exceed PLATFORM_KEY_PUBLISH_AHEAD (${publishAheadSeconds} s)`,
    );
  return Object.freeze({ encryptionKey, lifetimeSeconds, publishAheadSeconds });
}

/**
 * `cimd` and `cimd_host` count every outbound fetch a request causes (idp/outbound: Client ID Metadata Documents,
 * jwks_uri, trusted issuers' key sets, upstream metadata), per client address and per fetched host.
 */
export type RateLimitedEndpoint = 'register' | 'token' | 'revoke' | 'device' | 'cimd' | 'cimd_host';
export type RateLimits = Readonly<Record<RateLimitedEndpoint, { points: number; seconds: number }>>;

/**
 * Per client address. Generous: a person or a CI runner never meets them, a script hammering the endpoint
 * does. `token` is the highest because MCP clients refresh often and several run behind one NAT.
 */
export const DEFAULT_RATE_LIMITS: RateLimits = Object.freeze({
  register: { points: 100, seconds: 60 },
  token: { points: 600, seconds: 60 },
  revoke: { points: 300, seconds: 60 },
  device: { points: 60, seconds: 60 },
  cimd: { points: 30, seconds: 60 },
  cimd_host: { points: 60, seconds: 60 },
});

export function parseRateLimits(value: string | undefined): RateLimits {
  const out = { ...DEFAULT_RATE_LIMITS };
  if (value === undefined) return Object.freeze(out);
  const seen = new Set<string>();
  for (const part of value.split(',').map((p) => p.trim())) {
    if (part === '') continue;
    const m = /^([a-z_]+)=(\d{1,9})\/(\d{1,7})$/.exec(part);
    if (!m) throw new ConfigError('PLATFORM_RATE_LIMITS', `"${part}" is not <endpoint>=<count>/<seconds>`);
    const [, name, count, seconds] = m as unknown as [string, string, string, string];
    if (!(name in DEFAULT_RATE_LIMITS))
      throw new ConfigError(
        'PLATFORM_RATE_LIMITS',
        `unknown endpoint "${name}" (use ${Object.keys(DEFAULT_RATE_LIMITS).join(', ')})`,
      );
    if (seen.has(name)) throw new ConfigError('PLATFORM_RATE_LIMITS', `"${name}" is given more than once`);
    seen.add(name);
    if (Number(count) < 1 || Number(seconds) < 1)
      throw new ConfigError('PLATFORM_RATE_LIMITS', `"${part}": count and seconds must be at least 1`);
    out[name as RateLimitedEndpoint] = { points: Number(count), seconds: Number(seconds) };
  }
  return Object.freeze(out);
}

/** Addresses or CIDR blocks (`10.0.0.0/8`, `::1`); checked here so a typo stops start-up. */
export function parseTrustedProxies(list: readonly string[]): string[] {
  for (const entry of list) {
    const [addr, bits, extra] = entry.split('/');
    const family = isIP(addr ?? '');
    const max = family === 4 ? 32 : 128;
    const bad =
      family === 0 ||
      extra !== undefined ||
      (bits !== undefined && (!/^\d{1,3}$/.test(bits) || Number(bits) > max));
    if (bad)
      throw new ConfigError('PLATFORM_TRUSTED_PROXIES', `"${entry}" is not an IP address or CIDR block`);
  }
  return [...list];
}

/**
 * PLATFORM_CONNECTIONS_FILE and PLATFORM_CONNECTIONS_KEY: the file is read now, so a malformed one stops
 * start-up with one line naming the problem; the grants need a sealing key (docs/connections.md § Storage).
 */
function connectionsConfig(env: Env, rotation: KeyRotationConfig | undefined): ConnectionsConfig | undefined {
  const file = optionalString(env, 'PLATFORM_CONNECTIONS_FILE');
  const key = optionalSecret(env, 'PLATFORM_CONNECTIONS_KEY');
  if (file === undefined) {
    if (key !== undefined)
      throw new ConfigError('PLATFORM_CONNECTIONS_KEY', 'is set but PLATFORM_CONNECTIONS_FILE is not');
    return undefined;
  }
  if (key !== undefined) {
    if (key.length < MIN_ENCRYPTION_KEY_LENGTH)
      throw new ConfigError(
        'PLATFORM_CONNECTIONS_KEY',
        `is ${key.length} characters; use at least ${MIN_ENCRYPTION_KEY_LENGTH} random ones (openssl rand -base64 48)`,
      );
    if (new Set(key).size < 8)
      throw new ConfigError('PLATFORM_CONNECTIONS_KEY', 'repeats too few characters to be a random secret');
  }
  const sealingSecret = key ?? rotation?.encryptionKey;
  if (sealingSecret === undefined)
    throw new ConfigError(
      'PLATFORM_CONNECTIONS_KEY',
      'is required with PLATFORM_CONNECTIONS_FILE (or PLATFORM_KEY_ROTATION=auto, whose encryption key then seals the grants)',
    );
  let list: ConnectionConfig[];
  try {
    list = readConnectionsFile(file);
  } catch (err) {
    throw new ConfigError('PLATFORM_CONNECTIONS_FILE', (err as Error).message);
  }
  return Object.freeze({ file, list: Object.freeze(list), sealingSecret });
}

/** Concurrent refresh: the default window, and the range an operator may set (the contract's floor is 30 s). */
export const DEFAULT_REFRESH_RETRY_SECONDS = 60;
export const REFRESH_RETRY_SECONDS_RANGE = { min: 30, max: 3600 } as const;

const EMAIL = /^[^\s@]+@[^\s@]+$/;

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

function table(env: Env, name: string, fallback: string): string {
  const v = optionalString(env, name) ?? fallback;
  if (!TABLE_NAME.test(v))
    throw new ConfigError(name, `must be a table name (optionally schema.table), got "${v}"`);
  return v;
}

function cimdConfig(env: Env): IdpConfig['cimd'] {
  const allowedHosts = csv(env, 'PLATFORM_CIMD_ALLOWED_HOSTS').map((v) => {
    const p = parseHostPattern(v);
    if (typeof p === 'string') throw new ConfigError('PLATFORM_CIMD_ALLOWED_HOSTS', p);
    return p;
  });
  const caFile = optionalString(env, 'PLATFORM_CIMD_CA_FILE');
  let ca: string | undefined;
  if (caFile !== undefined) {
    try {
      ca = readFileSync(caFile, 'utf8');
    } catch (err) {
      throw new ConfigError('PLATFORM_CIMD_CA_FILE', `cannot be read: ${(err as Error).message}`);
    }
    if (!ca.includes('-----BEGIN CERTIFICATE-----'))
      throw new ConfigError('PLATFORM_CIMD_CA_FILE', `${caFile} holds no PEM certificate`);
  }
  const pinnedDir = optionalString(env, 'PLATFORM_CIMD_PINNED_DIR');
  let pinned: ReadonlyMap<string, MetadataClient> = new Map();
  if (pinnedDir !== undefined) {
    try {
      pinned = loadPinnedDocuments(pinnedDir);
    } catch (err) {
      throw new ConfigError('PLATFORM_CIMD_PINNED_DIR', (err as Error).message);
    }
  }
  return Object.freeze({ allowedHosts: Object.freeze(allowedHosts), ca, pinned });
}

/** Checked for shape here; the database checks the query itself at start-up (see entitlements/roles.ts). */
function rolesSql(env: Env): string | undefined {
  const sql = optionalString(env, 'PLATFORM_ROLES_SQL');
  if (sql === undefined) return undefined;
  if (!/\$1(?!\d)/.test(sql)) throw new ConfigError('PLATFORM_ROLES_SQL', 'must take the user id as $1');
  if (/\$(?:[2-9]|1\d)/.test(sql))
    throw new ConfigError('PLATFORM_ROLES_SQL', 'takes one parameter, $1 (the user id)');
  return sql.replace(/;\s*$/, '');
}

function adminEmails(env: Env): ReadonlySet<string> {
  const list = csv(env, 'PLATFORM_ADMIN_EMAILS').map((e) => e.toLowerCase());
  for (const e of list) {
    if (!EMAIL.test(e)) throw new ConfigError('PLATFORM_ADMIN_EMAILS', `"${e}" is not an email address`);
  }
  return new Set(list);
}

export function loadIdpConfig(env: Env, opts: { redisRequired?: boolean } = {}): IdpConfig {
  const issuer =
    httpUrl(env, 'PLATFORM_OIDC_ISSUER') ??
    httpUrl(env, 'PUBLIC_BASE_URL') ??
    (() => {
      throw new ConfigError('PLATFORM_OIDC_ISSUER', 'is required (or set PUBLIC_BASE_URL)');
    })();
  const services = csv(env, 'PLATFORM_SERVICES', ['platform', 'mail', 'deals', 'calendar', 'crm']);
  for (const s of services) {
    if (!isServiceName(s))
      throw new ConfigError('PLATFORM_SERVICES', `"${s}" is not a service name ([a-z][a-z0-9-]*)`);
  }
  if (services.length === 0) throw new ConfigError('PLATFORM_SERVICES', 'names no service');
  const allowedRedirectUris = csv(env, 'PLATFORM_ALLOWED_REDIRECT_URIS');
  for (const u of allowedRedirectUris) {
    let parsed: URL;
    try {
      parsed = new URL(u);
    } catch {
      throw new ConfigError('PLATFORM_ALLOWED_REDIRECT_URIS', `"${u}" is not an absolute URL`);
    }
    if (parsed.hash)
      throw new ConfigError('PLATFORM_ALLOWED_REDIRECT_URIS', `"${u}" must not carry a fragment`);
  }
  const cookie = optionalString(env, 'PLATFORM_SESSION_COOKIE');
  if (cookie !== undefined && !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(cookie))
    throw new ConfigError('PLATFORM_SESSION_COOKIE', `"${cookie}" is not a cookie name`);
  const redis = redisUrl(env);
  if (opts.redisRequired !== false && redis === undefined) {
    throw new ConfigError(
      'REDIS_URL',
      'is required (revocations are published through Redis); or REDIS_SENTINELS or REDIS_CLUSTER_NODES',
    );
  }
  const idpPort = port(env, 'IDP_PORT', 4000);
  const rotation = keyRotation(env);
  return Object.freeze({
    port: idpPort,
    telemetry: telemetryConfig(env, 'platform-idp'),
    issuer,
    privateKey: rotation ? optionalSecret(env, 'PLATFORM_OIDC_PRIVATE_KEY') : staticSigningKey(env),
    keyRotation: rotation,
    audience: requiredString(env, 'PLATFORM_AUDIENCE'),
    services,
    allowedRedirectUris,
    sessionCookie:
      cookie ?? (issuer.startsWith('https://') ? '__Secure-authjs.session-token' : 'authjs.session-token'),
    loginUrl: httpUrl(env, 'PLATFORM_LOGIN_URL') ?? `${issuer}/api/auth/signin`,
    publicBaseUrl: httpUrl(env, 'PUBLIC_BASE_URL'),
    databaseUrl: databaseUrl(env),
    redisUrl: redis,
    logLevel: logLevel(env),
    metricsPort: metricsPort(env, idpPort),
    cimd: cimdConfig(env),
    trustedIssuersFile: optionalString(env, 'PLATFORM_TRUSTED_ISSUERS_FILE'),
    entitlements: oneOf(env, 'PLATFORM_ENTITLEMENTS', ['open', 'managed'] as const, 'open'),
    rolesSql: rolesSql(env),
    entMax: integer(env, 'PLATFORM_ENT_MAX', 100, { min: 1, max: 10_000 }),
    adminEmails: adminEmails(env),
    rateLimits: parseRateLimits(optionalString(env, 'PLATFORM_RATE_LIMITS')),
    trustedProxies: parseTrustedProxies(csv(env, 'PLATFORM_TRUSTED_PROXIES')),
    refreshRetrySeconds: integer(
      env,
      'PLATFORM_REFRESH_RETRY_SECONDS',
      DEFAULT_REFRESH_RETRY_SECONDS,
      REFRESH_RETRY_SECONDS_RANGE,
    ),
    adminRequireDpop: oneOf(env, 'PLATFORM_ADMIN_REQUIRE_DPOP', ['on', 'off'] as const, 'off') === 'on',
    dpopNonce: oneOf(env, 'PLATFORM_DPOP_NONCE', ['on', 'off'] as const, 'off') === 'on',
    authjsSecrets: authjsSecrets(env),
    connections: connectionsConfig(env, rotation),
    gatewayClientSecret: gatewayClientSecret(env),
    authjs: Object.freeze({
      usersTable: table(env, 'PLATFORM_AUTHJS_USERS_TABLE', 'users'),
      accountsTable: table(env, 'PLATFORM_AUTHJS_ACCOUNTS_TABLE', 'accounts'),
      sessionsTable: table(env, 'PLATFORM_AUTHJS_SESSIONS_TABLE', 'sessions'),
      subjectProvider: optionalString(env, 'PLATFORM_AUTHJS_SUBJECT_PROVIDER') ?? 'microsoft-entra-id',
    }),
  });
}

/** PLATFORM_AUTHJS_SECRET: one secret or several comma-separated (newest first), as Auth.js takes AUTH_SECRET. */
function authjsSecrets(env: Env): readonly string[] {
  const given = optionalSecret(env, 'PLATFORM_AUTHJS_SECRET');
  if (given === undefined) return Object.freeze([]);
  const secrets = given.split(',').map((s) => s.trim());
  if (secrets.some((s) => s === ''))
    throw new ConfigError('PLATFORM_AUTHJS_SECRET', 'names an empty secret (a stray comma?)');
  return Object.freeze(secrets);
}

/** The gateway client's secret authenticates the one client that may read users' upstream tokens: a long one. */
function gatewayClientSecret(env: Env): string | undefined {
  const secret = optionalSecret(env, 'PLATFORM_GATEWAY_CLIENT_SECRET');
  if (secret !== undefined && secret.length < MIN_GATEWAY_CLIENT_SECRET_LENGTH)
    throw new ConfigError(
      'PLATFORM_GATEWAY_CLIENT_SECRET',
      `is ${secret.length} characters; use at least ${MIN_GATEWAY_CLIENT_SECRET_LENGTH} random ones (openssl rand -base64 48)`,
    );
  return secret;
}

/** PLATFORM_OIDC_PRIVATE_KEY without rotation: required, and the error names the other way to run. */
function staticSigningKey(env: Env): string {
  const key = optionalSecret(env, 'PLATFORM_OIDC_PRIVATE_KEY');
  if (key === undefined) {
    throw new ConfigError(
      'PLATFORM_OIDC_PRIVATE_KEY',
      'is required (or PLATFORM_OIDC_PRIVATE_KEY_FILE, a file holding it), unless PLATFORM_KEY_ROTATION=auto keeps the signing keys in Postgres',
    );
  }
  return key;
}
