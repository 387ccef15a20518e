import { homedir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, type Env, httpUrl, optionalString } from '../lib/config.ts';

/** The process environment, captured once here and handed to each command's own config loader. */
export function processEnv(): Env {
  return process.env;
}

export interface ClientConfig {
  issuer: string;
  gatewayUrl: string;
  credentialsPath: string;
  /** A token given by --token / PLATFORM_TOKEN: used as is, never refreshed (headless use). */
  token: string | undefined;
  /** How long `platform login` waits for the browser to come back to the loopback listener. */
  loginTimeoutMs: number;
  /** Whether `platform login` asks the desktop to open the sign-in page (the URL is printed either way). */
  openBrowser: boolean;
  /** The user's BROWSER command, else the platform's opener. */
  browserCommand: string | undefined;
}

export interface ClientFlags {
  issuer?: string;
  gateway?: string;
  token?: string;
  /** commander's `--no-browser` sets this to false. */
  browser?: boolean;
}

const DEFAULT_LOGIN_TIMEOUT_SECONDS = 300;

/** The user-facing commands' settings (login, token, logout, call); flags win over the environment. */
export function loadClientConfig(env: Env, flags: ClientFlags = {}): ClientConfig {
  const configHome = optionalString(env, 'XDG_CONFIG_HOME') ?? join(homedir(), '.config');
  return Object.freeze({
    issuer: flag('--issuer', flags.issuer) ?? httpUrl(env, 'PLATFORM_ISSUER') ?? 'http://localhost:4000',
    gatewayUrl:
      flag('--gateway', flags.gateway) ?? httpUrl(env, 'PLATFORM_GATEWAY_URL') ?? 'http://localhost:8080',
    credentialsPath: join(configHome, 'platform', 'credentials.json'),
    token: flags.token?.trim() || optionalString(env, 'PLATFORM_TOKEN'),
    loginTimeoutMs: seconds(env, 'PLATFORM_LOGIN_TIMEOUT', DEFAULT_LOGIN_TIMEOUT_SECONDS) * 1000,
    openBrowser: flags.browser !== false,
    browserCommand: optionalString(env, 'BROWSER'),
  });
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
