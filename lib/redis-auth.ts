import { ConfigError } from './config.ts';
import { createRedisClient } from './redis/client.ts';

/** Redis refusing the credentials of the URL (wrong password, unknown or disabled ACL user, none given). */
export function isRedisAuthError(err: unknown): boolean {
  return /^(WRONGPASS|NOAUTH|NOPERM)\b|invalid password|ERR AUTH/i.test((err as Error)?.message ?? '');
}

/**
 * Start-up: one connection and PING with the URL's credentials. Redis refusing them is a configuration error
 * (exit 2, one line naming the variable, the password never printed); Redis unreachable is not (an outage the
 * process rides out, docs/gateway.md § Redis down). With Sentinel the Sentinels are asked for the master first
 * (their own credentials refused are reported the same way); with a Cluster every node is asked for the slots.
 */
export async function checkRedisCredentials(url: string, variable = 'REDIS_URL'): Promise<void> {
  const probe = createRedisClient(url, {
    lazyConnect: true,
    connectTimeout: 2000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    connectionName: 'credentials-check',
  });
  let refused: Error | undefined;
  probe.on('error', (err: Error) => {
    if (isRedisAuthError(err)) refused ??= err;
  });
  try {
    await probe.connect();
    await probe.ping();
  } catch (err) {
    if (isRedisAuthError(err)) refused ??= err as Error;
  } finally {
    probe.disconnect();
  }
  if (refused) {
    throw new ConfigError(
      variable,
      `Redis refused the credentials (${refused.message.split('\n')[0]}); check the user and password in the URL`,
    );
  }
}
