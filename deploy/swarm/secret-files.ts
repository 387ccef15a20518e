import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { deriveIdentityKey } from '../../lib/identity.ts';

// Every secret file deploy/stack.yaml, stack.key-rotation.yaml and stack.postgres.yaml declare, with fresh values
// that fit together: the Redis URLs carry the passwords the ACL file gives its users, the database URLs the
// passwords the Postgres example gives its roles, each tool server's key is derived from the gateway's secret.

export const TOOL_SERVICES = ['platform', 'mail', 'deals'] as const;

const hex = () => randomBytes(32).toString('hex');

/** The file name (in PLATFORM_SECRETS_DIR) → its contents, without the trailing newline written after it. */
export function swarmSecretFiles(o: {
  /** `host:port/database[?options]` of the platform's database; the Postgres example's is postgres:5432/platform. */
  databaseAddress: string;
  /** The Redis users' ACL template, deploy/redis-users.acl.example. */
  redisAclTemplate: string;
}): Record<string, string> {
  const [redisAdmin, redisIdp, redisGateway] = [hex(), hex(), hex()];
  const [migrate, idp, tools] = [hex(), hex(), hex()];
  const identitySecret = randomBytes(48).toString('base64url');
  const url = (role: string, password: string) => `postgresql://${role}:${password}@${o.databaseAddress}`;
  const acl = o.redisAclTemplate
    .replace('>ADMIN_PASSWORD', `>${redisAdmin}`)
    .replace('>IDP_PASSWORD', `>${redisIdp}`)
    .replace('>GATEWAY_PASSWORD', `>${redisGateway}`);
  if (/>(ADMIN|IDP|GATEWAY)_PASSWORD/.test(acl) || acl === o.redisAclTemplate)
    throw new Error('the Redis ACL template does not name ADMIN_PASSWORD, IDP_PASSWORD and GATEWAY_PASSWORD');
  return {
    'redis-users.acl': acl.trimEnd(),
    'redis-admin-password': redisAdmin,
    'idp-redis-url': `redis://idp:${redisIdp}@redis:6379`,
    'gateway-redis-url': `redis://gateway:${redisGateway}@redis:6379`,
    'migrate-database-url': url('platform_migrate', migrate),
    'idp-database-url': url('platform_idp', idp),
    'tools-database-url': url('platform_tools', tools),
    // The Postgres example's (deploy/stack.postgres.yaml): its superuser and the three roles' passwords.
    'postgres-password': hex(),
    'migrate-db-password': migrate,
    'idp-db-password': idp,
    'tools-db-password': tools,
    'oidc-private-key': generateKeyPairSync('rsa', { modulusLength: 2048 })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString()
      .trimEnd(),
    'key-encryption-key': randomBytes(48).toString('base64url'),
    'gateway-identity-secret': identitySecret,
    ...Object.fromEntries(
      TOOL_SERVICES.map((s) => [`${s}-tool-identity-key`, deriveIdentityKey(identitySecret, s)]),
    ),
  };
}
