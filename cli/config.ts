import { homedir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, type Env, httpUrl, optionalString, secret } from '../lib/config.ts';

/** The process environment, captured once here and handed to each command's own config loader. */
export function processEnv(): Env {
  return process.env;
}

export interface ClientConfig {
  issuer: string;
  /** Where `issuer` came from, for error lines that must name what to change (`--issuer`, a variable, …). */
  issuerFrom: string;
  /** False when `issuer` is the default (neither --issuer nor PLATFORM_ISSUER given). */
  issuerGiven: boolean;
  gatewayUrl: string;
  gatewayFrom: string;
  /** `platform login --scope`: the scopes to ask for; unset: every scope the issuer offers. */
  scope: string | undefined;
  credentialsPath: string;
  /** A token given by --token / PLATFORM_TOKEN: used as is, never refreshed (headless use). */
  token: string | undefined;
  /** How long `platform login` waits for the browser to come back to the loopback listener. */
  loginTimeoutMs: number;
  /** Whether `platform login` asks the desktop to open the sign-in page (the URL is printed either way). */
  openBrowser: boolean;
  /** The user's BROWSER command, else the platform's opener. */
  browserCommand: string | undefined;
  /** Whether `platform login` binds the tokens to a new proof key (DPoP); `--no-dpop` turns it off. */
  dpop: boolean;
}

export interface ClientFlags {
  issuer?: string;
  gateway?: string;
  token?: string;
  scope?: string;
  /** commander's `--no-browser` sets this to false. */
  browser?: boolean;
  /** commander's `--no-dpop` sets this to false. */
  dpop?: boolean;
}

const DEFAULT_LOGIN_TIMEOUT_SECONDS = 300;
export const DEFAULT_ISSUER = 'http://localhost:4000';
export const DEFAULT_GATEWAY = 'http://localhost:8080';

/** The user-facing commands' settings (login, token, logout, call); flags win over the environment. */
export function loadClientConfig(env: Env, flags: ClientFlags = {}): ClientConfig {
  const configHome = optionalString(env, 'XDG_CONFIG_HOME') ?? join(homedir(), '.config');
  const issuer = pick(env, { flag: '--issuer', value: flags.issuer }, 'PLATFORM_ISSUER', DEFAULT_ISSUER);
  const gateway = pick(
    env,
    { flag: '--gateway', value: flags.gateway },
    'PLATFORM_GATEWAY_URL',
    DEFAULT_GATEWAY,
  );
  const scope = flags.scope?.trim().replace(/\s+/g, ' ');
  if (flags.scope !== undefined && !scope) throw new ConfigError('--scope', 'must name at least one scope');
  return Object.freeze({
    issuer: issuer.url,
    issuerFrom: issuer.from,
    issuerGiven: issuer.given,
    gatewayUrl: gateway.url,
    gatewayFrom: gateway.from,
    scope,
    credentialsPath: join(configHome, 'platform', 'credentials.json'),
    token: flags.token?.trim() || secret(env, 'PLATFORM_TOKEN')?.value.trim(),
    loginTimeoutMs: seconds(env, 'PLATFORM_LOGIN_TIMEOUT', DEFAULT_LOGIN_TIMEOUT_SECONDS) * 1000,
    openBrowser: flags.browser !== false,
    browserCommand: optionalString(env, 'BROWSER'),
    dpop: flags.dpop !== false,
  });
}

/**
 * A URL from its flag, else its variable, else the default, with the words that say where it came from: an
 * error line about the URL then names what to change.
 */
function pick(
  env: Env,
  given: { flag: string; value: string | undefined },
  variable: string,
  fallback: string,
): { url: string; from: string; given: boolean } {
  const fromFlag = flag(given.flag, given.value);
  if (fromFlag) return { url: fromFlag, from: `from ${given.flag}`, given: true };
  const fromEnv = httpUrl(env, variable);
  if (fromEnv) return { url: fromEnv, from: `from ${variable}`, given: true };
  return { url: fallback, from: `the default; ${given.flag} or ${variable} sets another`, given: false };
}

/** A URL flag, checked like its variable; the ConfigError names the flag. */
function flag(name: string, value: string | undefined): string | undefined {
  return value === undefined ? undefined : httpUrl({ [name]: value }, name, value.trim());
}

function seconds(env: Env, name: string, fallback: number): number {
  const v = optionalString(env, name);
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < 1)
    throw new ConfigError(name, `must be a whole number of seconds, got "${v}"`);
  return Number(v);
}
