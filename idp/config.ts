import { readFileSync } from 'node:fs';
import {
  ConfigError,
  csv,
  databaseUrl,
  type Env,
  httpUrl,
  logLevel,
  optionalString,
  port,
  redisUrl,
  requiredString,
} from '../lib/config.ts';
import { type HostPattern, parseHostPattern } from '../lib/host-patterns.ts';

export interface IdpConfig {
  port: number;
  issuer: string;
  /** PLATFORM_OIDC_PRIVATE_KEY as given: PEM, a JWK, or a JSON array of JWKs (parsed by tokens/keys.ts). */
  privateKey: string;
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
  /** Client ID Metadata Documents: hosts allowed to serve them (empty: any public host), an extra CA (PEM). */
  cimd: { allowedHosts: readonly HostPattern[]; ca: string | undefined };
  authjs: {
    usersTable: string;
    accountsTable: string;
    sessionsTable: string;
    /** The `accounts.provider` whose providerAccountId is the user's `sub` (the Entra object id). */
    subjectProvider: string;
  };
}

const SERVICE_NAME = /^[a-z][a-z0-9-]{0,31}$/;
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
  return Object.freeze({ allowedHosts: Object.freeze(allowedHosts), ca });
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
    if (!SERVICE_NAME.test(s))
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
    throw new ConfigError('REDIS_URL', 'is required (revocations are published through Redis)');
  }
  return Object.freeze({
    port: port(env, 'IDP_PORT', 4000),
    issuer,
    privateKey: requiredString(env, 'PLATFORM_OIDC_PRIVATE_KEY'),
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
    cimd: cimdConfig(env),
    authjs: Object.freeze({
      usersTable: table(env, 'PLATFORM_AUTHJS_USERS_TABLE', 'users'),
      accountsTable: table(env, 'PLATFORM_AUTHJS_ACCOUNTS_TABLE', 'accounts'),
      sessionsTable: table(env, 'PLATFORM_AUTHJS_SESSIONS_TABLE', 'sessions'),
      subjectProvider: optionalString(env, 'PLATFORM_AUTHJS_SUBJECT_PROVIDER') ?? 'microsoft-entra-id',
    }),
  });
}
