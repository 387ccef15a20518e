// The Swarm stack's secrets generator (deploy/swarm/write-secrets.ts) and Postgres example (stack.postgres.yaml):
// the generator run as an operator runs it, then `docker stack config` of stack.yaml + stack.key-rotation.yaml +
// stack.postgres.yaml pointed at its folder; every secret the stack declares is a file there, every server's
// environment with its mounted secrets is accepted by that server's own config loader (which refuses published
// example values), and the values fit together (Redis users, database roles, derived identity keys). The
// Postgres example's roles script reads its passwords from those files (run with a psql of the test's own that
// prints what it was given). And `migrate` stays up once it has applied the migrations, so Swarm shows it 1/1.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadGatewayConfig } from '../../gateway/config.ts';
import { loadIdpConfig } from '../../idp/config.ts';
import { databaseUrl } from '../../lib/config.ts';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { loadToolConfig } from '../../tools/config.ts';
import { DEPLOY_DIR, REPO_DIR, withMountedFiles } from './support.ts';

interface Service {
  environment?: Record<string, string>;
  secrets?: { source: string; target: string }[];
  deploy?: { mode?: string };
}
interface Stack {
  services: Record<string, Service>;
  secrets: Record<string, { file: string }>;
}

const scratch = mkdtempSync(join(tmpdir(), 'swarm-secrets-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const dir = join(scratch, 'secrets');
const ORIGIN = 'https://app.example.com';

const write = () =>
  spawnSync(process.execPath, [join(DEPLOY_DIR, 'swarm/write-secrets.ts'), '--dir', dir], {
    encoding: 'utf8',
  });
const read = (name: string) => readFileSync(join(dir, name), 'utf8').replace(/\n$/, '');

function stackConfig(): Stack {
  const out = execFileSync(
    'docker',
    ['stack', 'config', '-c', 'stack.yaml', '-c', 'stack.key-rotation.yaml', '-c', 'stack.postgres.yaml'],
    {
      cwd: DEPLOY_DIR,
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        PLATFORM_SECRETS_DIR: dir,
        PUBLIC_BASE_URL: ORIGIN,
        PLATFORM_OIDC_ISSUER: ORIGIN,
        PLATFORM_AUDIENCE: ORIGIN,
        FRONT_SUBNET: '172.16.240.0/24',
      },
    },
  );
  return parse(out) as Stack;
}

/** A service's environment as its task sees it: its Swarm secrets mounted under /run/secrets/<target>. */
function envOf(stack: Stack, name: string): Record<string, string> {
  const s = stack.services[name]!;
  const mounted: Record<string, string> = {};
  for (const x of s.secrets ?? [])
    mounted[`/run/secrets/${x.target}`] = readFileSync(stack.secrets[x.source]!.file, 'utf8');
  return withMountedFiles(s.environment ?? {}, mounted, mkdtempSync(join(scratch, `${name}-`)));
}

describe('deploy/swarm/write-secrets.ts', () => {
  it('writes every secret the stack, its key-rotation and its Postgres files declare, 0600 in a 0700 folder', () => {
    const r = write();
    expect(r.status, r.stderr).toBe(0);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const stack = stackConfig();
    for (const [name, s] of Object.entries(stack.secrets)) {
      expect(s.file.startsWith(`${dir}/`), name).toBe(true);
      expect(statSync(s.file).mode & 0o777, name).toBe(0o600);
    }
    expect(Object.keys(stack.secrets).length).toBeGreaterThanOrEqual(17);
  });

  it("gives every server an environment its own config loader accepts (fresh values, no example's)", () => {
    const stack = stackConfig();
    expect(() => databaseUrl(envOf(stack, 'migrate'))).not.toThrow();
    const idp = loadIdpConfig(envOf(stack, 'idp'));
    expect(idp.keyRotation).toBeDefined();
    expect(idp.services).toEqual(['platform', 'mail', 'deals']);
    expect(loadGatewayConfig(envOf(stack, 'gateway')).services.map((s) => s.name)).toEqual([
      'platform',
      'mail',
      'deals',
    ]);
    for (const s of ['platform', 'mail', 'deals'])
      expect(loadToolConfig(s, envOf(stack, `tool-${s}`)).port).toBe(3000);
  });

  it('makes values that fit together: Redis users, database roles, identity keys', () => {
    const acl = read('redis-users.acl');
    for (const [user, file] of [
      ['idp', 'idp-redis-url'],
      ['gateway', 'gateway-redis-url'],
    ] as const) {
      const url = new URL(read(file));
      expect(url.username).toBe(user);
      expect(acl).toContain(`user ${user} on >${url.password} `);
    }
    expect(acl).toContain(`user admin on >${read('redis-admin-password')} `);
    for (const [role, file] of [
      ['platform_migrate', 'migrate'],
      ['platform_idp', 'idp'],
      ['platform_tools', 'tools'],
    ] as const) {
      const url = new URL(read(`${file}-database-url`));
      expect(url.username).toBe(role);
      expect(url.password).toBe(read(`${file}-db-password`));
      expect(url.host).toBe('postgres:5432');
    }
    for (const s of ['platform', 'mail', 'deals'])
      expect(read(`${s}-tool-identity-key`)).toBe(deriveIdentityKey(read('gateway-identity-secret'), s));
  });

  it('never overwrites: a second run stops, names the files, and changes nothing', () => {
    const before = read('gateway-identity-secret');
    const r = write();
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^write-secrets: .* already holds redis-users\.acl, .*: nothing written/);
    expect(read('gateway-identity-secret')).toBe(before);
  });
});

describe('deploy/stack.postgres.yaml and stack.yaml', () => {
  it("runs the roles script with the passwords of the stack's secret files", () => {
    const bin = join(scratch, 'bin');
    spawnSync('mkdir', ['-p', bin]);
    writeFileSync(join(bin, 'psql'), '#!/bin/sh\nprintf "%s\\n" "$@"\n');
    chmodSync(join(bin, 'psql'), 0o755);
    const stack = stackConfig();
    const pg = stack.services.postgres!;
    const env: Record<string, string> = { PATH: `${bin}:${process.env.PATH}` };
    for (const [k, v] of Object.entries(pg.environment ?? {})) {
      // Each /run/secrets/<target> path is the generated file the secret is made from.
      const secret = pg.secrets?.find((x) => v === `/run/secrets/${x.target}`);
      env[k] = secret ? stack.secrets[secret.source]!.file : v;
    }
    const out = execFileSync('sh', [join(REPO_DIR, 'deploy/postgres/roles.sh')], { env, encoding: 'utf8' });
    expect(out).toContain(`migrate_password=${read('migrate-db-password')}\n`);
    expect(out).toContain(`idp_password=${read('idp-db-password')}\n`);
    expect(out).toContain(`tools_password=${read('tools-db-password')}\n`);
  });

  it('keeps migrate up once the migrations are applied (1/1, not 0/1), retrying only a failed migration', () => {
    const m = stackConfig().services.migrate! as Service & {
      entrypoint?: string[];
      command?: string[];
      deploy?: { restart_policy?: { condition?: string } };
    };
    expect(m.entrypoint).toEqual(['sh', '-c', 'platform migrate && exec sleep infinity']);
    expect(m.command).toBeUndefined();
    expect(m.deploy?.mode ?? 'replicated').toBe('replicated');
    expect(m.deploy?.restart_policy?.condition).toBe('on-failure');
  });

  it("migrate's command stops at a failed migration and stays up after one that succeeded", () => {
    const bin = join(scratch, 'fake-platform');
    spawnSync('mkdir', ['-p', bin]);
    const m = stackConfig().services.migrate! as Service & { entrypoint: string[] };
    // `sleep` replaced too: the command's shape is what is checked, not an endless wait.
    writeFileSync(join(bin, 'sleep'), '#!/bin/sh\necho "idle $*"\n');
    chmodSync(join(bin, 'sleep'), 0o755);
    for (const [code, expected] of [
      [0, 'migrated\nidle infinity\n'],
      [3, 'migrated\n'],
    ] as const) {
      writeFileSync(join(bin, 'platform'), `#!/bin/sh\necho migrated\nexit ${code}\n`);
      chmodSync(join(bin, 'platform'), 0o755);
      const r = spawnSync(m.entrypoint[0]!, m.entrypoint.slice(1), {
        env: { PATH: `${bin}:/usr/bin:/bin` },
        encoding: 'utf8',
      });
      expect(r.stdout).toBe(expected);
      expect(r.status).toBe(code);
    }
  });
});
