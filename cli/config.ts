import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Env } from '../lib/config.ts';

/** The process environment, captured once here and handed to each command's own config loader. */
export function processEnv(): Env {
  return process.env;
}

export interface ClientConfig {
  issuer: string;
  gatewayUrl: string;
  credentialsPath: string;
  token: string | undefined;
}

/** The user-facing commands' settings (login, token, logout, call); flags win over the environment. */
export function loadClientConfig(env: Env, flags: { issuer?: string; gateway?: string; token?: string } = {}): ClientConfig {
  const configHome = env.XDG_CONFIG_HOME?.trim() || join(homedir(), '.config');
  return {
    issuer: (flags.issuer ?? env.PLATFORM_ISSUER ?? 'http://localhost:4000').replace(/\/+$/, ''),
    gatewayUrl: (flags.gateway ?? env.PLATFORM_GATEWAY_URL ?? 'http://localhost:8080').replace(/\/+$/, ''),
    credentialsPath: join(configHome, 'platform', 'credentials.json'),
    token: flags.token ?? (env.PLATFORM_TOKEN?.trim() || undefined),
  };
}
