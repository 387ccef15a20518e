// deploy/stack.key-rotation.yaml: signing-key rotation switched on for the Swarm stack. Both files merged by
// `docker stack config` (the docker CLI's own loader, no engine), then the IdP's environment and the secrets
// mounted into it fed to the IdP's own config loader: rotation on with the override, off without it, and
// nothing else in the stack changed.
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadIdpConfig } from '../../idp/config.ts';
import { DEPLOY_DIR, withMountedFiles } from './support.ts';

interface StackService {
  environment?: Record<string, string>;
  secrets?: { source: string; target: string }[];
}
interface Stack {
  services: Record<string, StackService>;
  secrets: Record<string, { file: string }>;
}

const SECRETS_DIR = '/srv/platform/secrets';
const ORIGIN = 'https://app.example.com';

/** `docker stack config` of deploy/stack.yaml, with the named override files after it. */
function stackConfig(...overrides: string[]): Stack {
  const out = execFileSync(
    'docker',
    ['stack', 'config', '-c', 'stack.yaml', ...overrides.flatMap((f) => ['-c', f])],
    {
      cwd: DEPLOY_DIR,
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        PLATFORM_SECRETS_DIR: SECRETS_DIR,
        PUBLIC_BASE_URL: ORIGIN,
        PLATFORM_OIDC_ISSUER: ORIGIN,
        PLATFORM_AUDIENCE: ORIGIN,
        FRONT_SUBNET: '172.16.240.0/24',
      },
    },
  );
  return parse(out) as Stack;
}

// What each secret file holds in a deployment of its own (one per Swarm secret the IdP may mount).
const contents: Record<string, string> = {
  oidc_private_key: generateKeyPairSync('rsa', { modulusLength: 2048 })
    .privateKey.export({ type: 'pkcs8', format: 'pem' })
    .toString(),
  idp_database_url: 'postgresql://platform_idp:own-password@postgres:5432/platform',
  idp_redis_url: 'redis://idp:own-password@redis:6379',
  key_encryption_key: randomBytes(36).toString('base64url'),
};

const dir = mkdtempSync(join(tmpdir(), 'stack-key-rotation-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The IdP's config as its task would load it: its environment, its secrets under /run/secrets/<target>. */
function idpConfig(stack: Stack) {
  const idp = stack.services.idp!;
  const mounted: Record<string, string> = {};
  for (const s of idp.secrets ?? []) {
    const content = contents[s.source];
    if (content === undefined) throw new Error(`no content for secret ${s.source}`);
    mounted[`/run/secrets/${s.target}`] = content;
  }
  return loadIdpConfig(withMountedFiles(idp.environment ?? {}, mounted, dir));
}

describe('deploy/stack.key-rotation.yaml (merged by docker stack config)', () => {
  const base = stackConfig();
  const rotating = stackConfig('stack.key-rotation.yaml');

  it('leaves rotation off in the stack alone: the static key signs', () => {
    const config = idpConfig(base);
    expect(config.keyRotation).toBeUndefined();
    expect(config.privateKey).toBe(contents.oidc_private_key!.trim());
  });

  it('switches rotation on, sealing keys under the key-encryption-key secret, and still imports the static key', () => {
    const config = idpConfig(rotating);
    expect(config.keyRotation).toMatchObject({
      encryptionKey: contents.key_encryption_key,
      // The IdP's defaults when PLATFORM_KEY_LIFETIME and PLATFORM_KEY_PUBLISH_AHEAD are not set.
      lifetimeSeconds: 30 * 86_400,
      publishAheadSeconds: 2 * 3600,
    });
    expect(config.privateKey).toBe(contents.oidc_private_key!.trim());
    expect(rotating.secrets.key_encryption_key).toEqual({ file: `${SECRETS_DIR}/key-encryption-key` });
    // Without the secret mounted, the IdP could not read its encryption key.
    const unmounted = structuredClone(rotating);
    unmounted.services.idp!.secrets = unmounted.services.idp!.secrets!.filter(
      (s) => s.source !== 'key_encryption_key',
    );
    expect(() => idpConfig(unmounted)).toThrow(/PLATFORM_KEY_ENCRYPTION_KEY_FILE names/);
  });

  it('changes nothing but the IdP’s rotation settings and its one new secret', () => {
    const stripped = structuredClone(rotating);
    const idp = stripped.services.idp!;
    for (const name of Object.keys(idp.environment ?? {}))
      if (name.startsWith('PLATFORM_KEY_')) delete idp.environment![name];
    idp.secrets = idp.secrets!.filter((s) => s.source !== 'key_encryption_key');
    delete stripped.secrets.key_encryption_key;
    // The CLI lists a service's secrets in its own order once a second file adds one: compared as sets.
    const sorted = (stack: Stack) => {
      const copy = structuredClone(stack);
      copy.services.idp!.secrets!.sort((a, b) => a.source.localeCompare(b.source));
      return copy;
    };
    expect(sorted(stripped)).toEqual(sorted(base));
    // The key is only ever a file: never a value in the stack.
    expect(rotating.services.idp!.environment).not.toHaveProperty('PLATFORM_KEY_ENCRYPTION_KEY');
  });
});
