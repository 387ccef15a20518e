// Secrets from files: every secret variable NAME may instead be NAME_FILE, the path of a file holding the value
// (a Docker Swarm secret in /run/secrets/, a Kubernetes Secret mounted as a volume). The rules: one trailing
// newline removed; NAME and NAME_FILE together, a file that cannot be read, or an empty one → one line at
// start-up naming the variable and the path; published example values are refused from a file as well.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadGatewayConfig } from '../../gateway/config.ts';
import { loadIdpConfig } from '../../idp/config.ts';
import { ConfigError, databaseUrl, optionalSecret, requiredSecret, secret } from '../../lib/config.ts';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { redisUrl } from '../../lib/redis/config.ts';
import { loadToolConfig } from '../../tools/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { freePort, startPlatform, testSigningKeyPem } from '../helpers/processes.ts';

let dir: string;
let n = 0;
/** A file of its own holding `text`; returns its path. */
function file(text: string, mode?: number): string {
  const p = join(dir, `secret-${n++}`);
  writeFileSync(p, text);
  if (mode !== undefined) chmodSync(p, mode);
  return p;
}

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'secret-files-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const IDENTITY_SECRET = 'secret-files-test-identity-secret-0123456789abcdef';

describe('lib/config secret(): NAME or NAME_FILE', () => {
  it('reads the file, removing one trailing newline and nothing else', () => {
    expect(secret({ X_FILE: file('abc\n') }, 'X')).toEqual({ value: 'abc', from: 'X_FILE' });
    expect(secret({ X_FILE: file('abc\r\n') }, 'X')?.value).toBe('abc');
    // Only one newline: a PEM's inner lines and a second trailing newline are part of the value.
    expect(secret({ X_FILE: file('a\nb\n\n') }, 'X')?.value).toBe('a\nb\n');
    expect(secret({ X_FILE: file(' spaced ') }, 'X')?.value).toBe(' spaced ');
    expect(secret({ X: ' direct ' }, 'X')).toEqual({ value: 'direct', from: 'X' });
    expect(secret({}, 'X')).toBeUndefined();
    expect(secret({ X: '', X_FILE: '  ' }, 'X')).toBeUndefined();
  });

  it('refuses NAME and NAME_FILE together, naming both', () => {
    const e = configError(() => secret({ X: 'a', X_FILE: file('b') }, 'X'));
    expect(e.message).toBe('X: is set and so is X_FILE; set only one of them');
  });

  it('refuses a missing, unreadable, non-regular, oversized or empty file in one line with the path', () => {
    const missing = join(dir, 'nope');
    expect(configError(() => secret({ X_FILE: missing }, 'X')).message).toBe(
      `X_FILE: cannot read "${missing}" (ENOENT)`,
    );
    const sub = join(dir, 'a-directory');
    mkdirSync(sub);
    expect(configError(() => secret({ X_FILE: sub }, 'X')).message).toBe(
      `X_FILE: "${sub}" is not a regular file`,
    );
    const big = file('x'.repeat(70_000));
    expect(configError(() => secret({ X_FILE: big }, 'X')).message).toMatch(/^X_FILE: ".*" is larger than/);
    const empty = file('\n');
    expect(configError(() => secret({ X_FILE: empty }, 'X')).message).toBe(`X_FILE: "${empty}" is empty`);
    if (process.getuid?.() !== 0) {
      const locked = file('value', 0o000);
      expect(configError(() => secret({ X_FILE: locked }, 'X')).message).toMatch(/EACCES/);
    }
  });

  it('refuses a published example value from a file, naming the variable, never the value', () => {
    const e = configError(() =>
      requiredSecret({ GATEWAY_IDENTITY_SECRET_FILE: file('change-me-to-48-random-bytes\n') }, 'X'),
    );
    expect(e.message).toMatch(/^X: is required \(or X_FILE/);
    const refused = configError(() => optionalSecret({ Y_FILE: file('change-me-please\n') }, 'Y'));
    expect(refused.variable).toBe('Y_FILE');
    expect(refused.message).toMatch(/^Y_FILE: names a file holding an example value/);
    expect(refused.message).not.toContain('change-me-please');
  });

  it('DATABASE_URL_FILE and REDIS_URL_FILE: the whole URL, checked and refused like the variable', () => {
    expect(databaseUrl({ DATABASE_URL_FILE: file('postgresql+asyncpg://u:pw@db:5432/app\n') })).toBe(
      'postgresql://u:pw@db:5432/app',
    );
    expect(configError(() => databaseUrl({ DATABASE_URL_FILE: file('/data/app.sqlite\n') })).message).toMatch(
      /^DATABASE_URL_FILE: must begin with postgresql:\/\//,
    );
    expect(
      configError(() => databaseUrl({ DATABASE_URL_FILE: file('postgresql://u:change-me@db/app\n') }))
        .message,
    ).toMatch(/^DATABASE_URL_FILE: carries a password that is an example value/);
    expect(configError(() => databaseUrl({})).message).toBe(
      'DATABASE_URL: is required (or DATABASE_URL_FILE, a file holding it)',
    );
    expect(redisUrl({ REDIS_URL_FILE: file('redis://gateway:pw@redis:6379\n') })).toBe(
      'redis://gateway:pw@redis:6379',
    );
    expect(configError(() => redisUrl({ REDIS_URL_FILE: file('http://redis\n') })).variable).toBe(
      'REDIS_URL_FILE',
    );
    expect(
      redisUrl({
        REDIS_SENTINELS: 's1:26379',
        REDIS_SENTINEL_MASTER: 'm',
        REDIS_PASSWORD_FILE: file('pw\n'),
      }),
    ).toBe('redis+sentinel://:pw@s1:26379/m/0');
  });
});

describe('each server reads its secrets from files', () => {
  it('the gateway: GATEWAY_IDENTITY_SECRET_FILE, <SERVICE>_MCP_SHARED_SECRET_FILE, REDIS_URL_FILE', () => {
    const shared = 'h'.repeat(40);
    const c = loadGatewayConfig({
      PUBLIC_BASE_URL: 'https://mcp.example.com',
      GATEWAY_SERVICES: 'deals',
      DEALS_MCP_UPSTREAM: 'http://deals:3000',
      GATEWAY_IDENTITY_SECRET_FILE: file(`${IDENTITY_SECRET}\n`),
      DEALS_MCP_SHARED_SECRET_FILE: file(`${shared}\n`),
      REDIS_URL_FILE: file('redis://gateway:pw@redis:6379\n'),
    });
    expect(c.services[0]!.identityKey).toBe(deriveIdentityKey(IDENTITY_SECRET, 'deals'));
    expect(c.services[0]!.sharedSecret?.toString()).toBe(shared);
    expect(c.redisUrl).toBe('redis://gateway:pw@redis:6379');
  });

  it('the IdP: PLATFORM_OIDC_PRIVATE_KEY_FILE (a PEM file as written by openssl)', () => {
    const c = loadIdpConfig({
      PLATFORM_OIDC_ISSUER: 'https://idp.example.com',
      PLATFORM_OIDC_PRIVATE_KEY_FILE: file(testSigningKeyPem()),
      PLATFORM_AUDIENCE: 'https://platform.test/api',
      DATABASE_URL_FILE: file('postgresql://idp:pw@db:5432/app\n'),
      REDIS_URL_FILE: file('redis://idp:pw@redis:6379\n'),
    });
    expect(c.privateKey).toBe(testSigningKeyPem().replace(/\n$/, ''));
    expect(c.databaseUrl).toBe('postgresql://idp:pw@db:5432/app');
  });

  it('a tool server: TOOL_IDENTITY_KEY_FILE, GRAPH_CLIENT_SECRET_FILE; GATEWAY_IDENTITY_SECRET_FILE refused', () => {
    const key = deriveIdentityKey(IDENTITY_SECRET, 'mail');
    const env = {
      DATABASE_URL_FILE: file('postgresql://tools:pw@db:5432/app\n'),
      TOOL_IDENTITY_KEY_FILE: file(`${key}\n`),
      GRAPH_TENANT_ID: 'contoso.onmicrosoft.com',
      GRAPH_CLIENT_ID: '00000000-0000-0000-0000-000000000001',
      GRAPH_CLIENT_SECRET_FILE: file('graph-client-secret-value\n'),
    };
    const c = loadToolConfig('mail', env);
    expect(c.identityKey).toBe(key);
    expect(c.graph?.clientSecret).toBe('graph-client-secret-value');
    // The all-or-none rule counts the file as given.
    const { GRAPH_CLIENT_ID: _, ...half } = env;
    expect(configError(() => loadToolConfig('mail', half)).variable).toBe('GRAPH_CLIENT_ID');
    // The gateway's master secret must not reach a tool server, as a variable or as a file.
    expect(
      configError(() =>
        loadToolConfig('mail', { ...env, GATEWAY_IDENTITY_SECRET_FILE: file(IDENTITY_SECRET) }),
      ).variable,
    ).toBe('GATEWAY_IDENTITY_SECRET_FILE');
  });
});

describe('real processes', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ migrated: false });
  });
  afterAll(() => db.drop());

  /** A start that is refused: exit 2 and exactly one line on stderr naming `variable`. */
  async function refused(args: string[], env: Record<string, string>, pattern: RegExp, hidden?: string) {
    const p = startPlatform(args, env);
    const timer = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
    const code = await p.exited;
    clearTimeout(timer);
    const lines = p.output().trim().split('\n');
    expect({ code, lines }).toEqual({ code: 2, lines: [expect.stringMatching(pattern)] });
    if (hidden) expect(p.output()).not.toContain(hidden);
  }

  it('the gateway starts on secrets from files and answers /health', async () => {
    const port = await freePort();
    const p = startPlatform(['gateway'], {
      GATEWAY_PORT: String(port),
      PUBLIC_BASE_URL: 'https://mcp.example.test',
      GATEWAY_SERVICES: 'mail',
      MAIL_MCP_UPSTREAM: 'http://127.0.0.1:1',
      GATEWAY_IDENTITY_SECRET_FILE: file(`${IDENTITY_SECRET}\n`),
      REDIS_URL_FILE: file(`${inject('redisUrl')}\n`),
    });
    try {
      await p.waitFor(/gateway listening/);
      const r = await fetch(`http://127.0.0.1:${port}/health`);
      expect(r.status).toBe(200);
    } finally {
      await p.stop();
    }
  });

  it('a refused start prints one line: both given, unreadable file, example value in the file', async () => {
    const base = {
      PUBLIC_BASE_URL: 'https://mcp.example.test',
      GATEWAY_SERVICES: 'mail',
      MAIL_MCP_UPSTREAM: 'http://127.0.0.1:1',
      REDIS_URL: inject('redisUrl'),
    };
    await refused(
      ['gateway'],
      {
        ...base,
        GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
        GATEWAY_IDENTITY_SECRET_FILE: file(IDENTITY_SECRET),
      },
      /^platform: configuration error: GATEWAY_IDENTITY_SECRET: is set and so is GATEWAY_IDENTITY_SECRET_FILE/,
    );
    await refused(
      ['gateway'],
      { ...base, GATEWAY_IDENTITY_SECRET_FILE: '/run/secrets/does-not-exist' },
      /^platform: configuration error: GATEWAY_IDENTITY_SECRET_FILE: cannot read "\/run\/secrets\/does-not-exist" \(ENOENT\)$/,
    );
    const example = 'change-me-to-48-random-bytes-from-openssl-rand-base64';
    await refused(
      ['gateway'],
      { ...base, GATEWAY_IDENTITY_SECRET_FILE: file(`${example}\n`) },
      /^platform: configuration error: GATEWAY_IDENTITY_SECRET_FILE: names a file holding an example value/,
      example,
    );
  });

  it('platform migrate reads DATABASE_URL_FILE; platform identity-key reads GATEWAY_IDENTITY_SECRET_FILE', async () => {
    const m = startPlatform(['migrate'], { DATABASE_URL_FILE: file(`${db.url}\n`) });
    expect(await m.exited, m.output()).toBe(0);
    expect(m.output()).toMatch(/migrations up to date/);
    const k = startPlatform(['identity-key', 'deals'], {
      GATEWAY_IDENTITY_SECRET_FILE: file(`${IDENTITY_SECRET}\n`),
    });
    expect(await k.exited, k.output()).toBe(0);
    expect(k.output().trim()).toBe(deriveIdentityKey(IDENTITY_SECRET, 'deals'));
    const bad = startPlatform(['identity-key', 'deals'], { GATEWAY_IDENTITY_SECRET_FILE: join(dir, 'none') });
    expect(await bad.exited).toBe(1);
    expect(bad.output().trim()).toMatch(
      /^platform: GATEWAY_IDENTITY_SECRET_FILE: cannot read ".*" \(ENOENT\)$/,
    );
  });
});
