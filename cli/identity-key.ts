import { ConfigError, type Env, secret as secretVariable } from '../lib/config.ts';
import { deriveIdentityKey, MIN_IDENTITY_SECRET_LENGTH } from '../lib/identity.ts';
import { isServiceName } from '../lib/service-name.ts';
import type { Io } from './client/io.ts';

/**
 * `platform identity-key <service>`: prints the service's identity key, derived from GATEWAY_IDENTITY_SECRET,
 * for that tool server's TOOL_IDENTITY_KEY. The secret stays with the gateway (and whoever runs this); each tool
 * server gets only its own key. Exit codes: 0 printed, 2 usage error (service name), 1 secret missing or short.
 */
export function printIdentityKey(service: string, env: Env, io: Io): number {
  if (!isServiceName(service)) {
    io.err(`platform: "${service}" is not a service name ([a-z][a-z0-9-]*, up to 32 characters)`);
    return 2;
  }
  let secret: string | undefined;
  try {
    secret = secretVariable(env, 'GATEWAY_IDENTITY_SECRET')?.value;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.err(`platform: ${err.message}`);
    return 1;
  }
  if (secret === undefined) {
    io.err("platform: GATEWAY_IDENTITY_SECRET is not set (the gateway's secret the key is derived from)");
    return 1;
  }
  if (secret.length < MIN_IDENTITY_SECRET_LENGTH) {
    io.err(`platform: GATEWAY_IDENTITY_SECRET must be at least ${MIN_IDENTITY_SECRET_LENGTH} characters`);
    return 1;
  }
  io.out(deriveIdentityKey(secret, service));
  return 0;
}
