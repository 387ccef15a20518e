// node deploy/swarm/write-secrets.ts --dir /srv/platform/secrets [--database-address postgres:5432/platform]
//
// Writes every secret file of the Swarm stack (deploy/stack.yaml, stack.key-rotation.yaml, stack.postgres.yaml)
// into --dir (created 0700; each file 0600), with fresh random values that fit together (docs/deploy.md § Docker
// Swarm). An existing file is never overwritten: the command stops before writing anything, naming it.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { swarmSecretFiles } from './secret-files.ts';

try {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string' },
      'database-address': { type: 'string', default: 'postgres:5432/platform' },
    },
    strict: true,
  });
  if (values.dir === undefined) throw new TypeError('--dir is required (the stack’s PLATFORM_SECRETS_DIR)');
  const files = swarmSecretFiles({
    databaseAddress: values['database-address'],
    redisAclTemplate: readFileSync(new URL('../redis-users.acl.example', import.meta.url), 'utf8'),
  });
  const present = Object.keys(files).filter((f) => existsSync(join(values.dir!, f)));
  if (present.length > 0)
    throw new Error(
      `${values.dir} already holds ${present.join(', ')}: nothing written (remove them to start over)`,
    );
  mkdirSync(values.dir, { recursive: true, mode: 0o700 });
  for (const [name, value] of Object.entries(files))
    writeFileSync(join(values.dir, name), `${value}\n`, { mode: 0o600, flag: 'wx' });
  process.stdout.write(`wrote ${Object.keys(files).length} secret files to ${values.dir}\n`);
} catch (err) {
  process.stderr.write(`write-secrets: ${(err as Error).message}\n`);
  process.exit(err instanceof TypeError ? 2 : 1);
}
