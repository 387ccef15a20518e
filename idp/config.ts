import {
  ConfigError,
  csv,
  databaseUrl,
  type Env,
  httpUrl,
  logLevel,
  oneOf,
  optionalString,
  port,
  redisUrl,
  requiredString,
} from '../lib/config.ts';

export interface IdpConfig {
  port: number;
  issuer: string;
  /** PLATFORM_OIDC_PRIVATE_KEY as given: PEM, a JWK, or a JSON array of JWKs (parsed by tokens/keys.ts). */
  privateKey: string;
  audience: string;
  services: string[];
  /** Exact non-loopback redirect URIs dynamic registration accepts (the connector callbacks). */
  allowedRedirectUris: string[];
  sessionCookies: string[];
  loginUrl: string;
  /** PUBLIC_BASE_URL when set: RFC 8707 resources must then be on this origin. */
  publicBaseUrl: string | undefined;
  databaseUrl: string;
  redisUrl: string | undefined;
  logLevel: string;
  /** `open`: every user gets every service; `managed`: only services granted to the user's email or roles. */
  entitlements: 'open' | 'managed';
  /** PLATFORM_ROLES_SQL: a query taking the user id as $1, one column of role names; undefined: no roles. */
  rolesSql: string | undefined;
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

/** Checked for shape here; the database checks the query itself at start-up (see entitlements/roles.ts). */
function rolesSql(env: Env): string | undefined {
  const sql = optionalString(env, 'PLATFORM_ROLES_SQL');
  if (sql === undefined) return undefined;
  if (!/\$1(?!\d)/.test(sql)) throw new ConfigError('PLATFORM_ROLES_SQL', 'must take the user id as $1');
  if (/\$(?:[2-9]|1\d)/.test(sql))
    throw new ConfigError('PLATFORM_ROLES_SQL', 'takes one parameter, $1 (the user id)');
  return sql.replace(/;\s*$/, '');
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
    sessionCookies: cookie ? [cookie] : ['authjs.session-token', '__Secure-authjs.session-token'],
    loginUrl: httpUrl(env, 'PLATFORM_LOGIN_URL') ?? `${issuer}/api/auth/signin`,
    publicBaseUrl: httpUrl(env, 'PUBLIC_BASE_URL'),
    databaseUrl: databaseUrl(env),
    redisUrl: redis,
    logLevel: logLevel(env),
    entitlements: oneOf(env, 'PLATFORM_ENTITLEMENTS', ['open', 'managed'] as const, 'open'),
    rolesSql: rolesSql(env),
    authjs: Object.freeze({
      usersTable: table(env, 'PLATFORM_AUTHJS_USERS_TABLE', 'users'),
      accountsTable: table(env, 'PLATFORM_AUTHJS_ACCOUNTS_TABLE', 'accounts'),
      sessionsTable: table(env, 'PLATFORM_AUTHJS_SESSIONS_TABLE', 'sessions'),
      subjectProvider: optionalString(env, 'PLATFORM_AUTHJS_SUBJECT_PROVIDER') ?? 'microsoft-entra-id',
    }),
  });
}
