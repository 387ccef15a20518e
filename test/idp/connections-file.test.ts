// PLATFORM_CONNECTIONS_FILE: the schema's rules, a malformed file stopping start-up with one line naming the
// problem, and SIGHUP reloading it (a bad file keeps the connections in force).
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadIdpConfig } from '../../idp/config.ts';
import { ConnectionsFileError, parseConnections } from '../../idp/connections/file.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess, startPlatform, testSigningKeyPem } from '../helpers/processes.ts';

const KEY = 'k7Qm2Zp9Vx4Lr8Tn3Wb6Yc1Hd5Jf0Gs2Ae9Uq';
const secret = () => 'the-secret';

const OAUTH = `connections:
  - name: github
    kind: oauth
    authorization_endpoint: https://github.com/login/oauth/authorize
    token_endpoint: https://github.com/login/oauth/access_token
    client_id: Iv1.abc
    client_secret_file: /run/secrets/github
    scopes: [repo, read:user]
  - name: acme-mcp
    kind: oauth
    issuer: https://auth.acme.example
    client_id: platform
    scopes: [mcp]
    resource: https://mcp.acme.example/mcp
  - name: graph
    kind: entra
    tenant_id: contoso.onmicrosoft.com
    client_id: 00000000-0000-0000-0000-000000000001
    client_secret_file: /run/secrets/entra
    scopes: [offline_access, Mail.Send, Calendars.ReadWrite]
`;

describe('the connections file', () => {
  it('reads oauth (endpoints or issuer; public client without a secret) and entra (default token endpoint)', () => {
    const list = parseConnections(OAUTH, secret);
    expect(list.map((c) => [c.name, c.kind, c.clientSecret])).toEqual([
      ['github', 'oauth', 'the-secret'],
      ['acme-mcp', 'oauth', undefined],
      ['graph', 'entra', 'the-secret'],
    ]);
    expect(list[1]).toMatchObject({
      issuer: 'https://auth.acme.example',
      resource: 'https://mcp.acme.example/mcp',
    });
    expect(list[2]).toMatchObject({
      tokenEndpoint: 'https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token',
    });
  });

  it.each([
    ['a bad name', OAUTH.replace('name: github', 'name: GitHub'), /connections\[0\].*name: must match/],
    ['a name twice', OAUTH.replace('name: acme-mcp', 'name: github'), /name github is listed twice/],
    ['an unknown member', OAUTH.replace('    scopes: [mcp]', '    scopes: [mcp]\n    colour: red'), /colour/],
    [
      'no issuer and one endpoint',
      OAUTH.replace('    token_endpoint: https://github.com/login/oauth/access_token\n', ''),
      /give issuer .* or both authorization_endpoint and token_endpoint/,
    ],
    [
      'an http URL off loopback',
      OAUTH.replace('https://auth.acme.example', 'http://auth.acme.example'),
      /https/,
    ],
    [
      'entra without a secret file',
      OAUTH.replace('    client_secret_file: /run/secrets/entra\n', ''),
      /client_secret_file/,
    ],
    ['an unknown kind', OAUTH.replace('kind: entra', 'kind: saml'), /connections\[2\]/],
    ['no list', 'connection: []\n', /`connections:` list/],
    ['not YAML', 'connections: [\n', /not valid YAML at line/],
  ])('refuses %s with one line naming it', (_what, text, message) => {
    let err: unknown;
    try {
      parseConnections(text, secret);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConnectionsFileError);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).not.toContain('\n');
  });

  it('a secret file that cannot be read is named', () => {
    expect(() =>
      parseConnections(OAUTH, () => {
        throw Object.assign(new Error('nope'), { code: 'ENOENT' });
      }),
    ).toThrow(/client_secret_file \/run\/secrets\/github cannot be read: ENOENT/);
  });
});

describe('the sealing key', () => {
  const base = {
    PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
    PLATFORM_AUDIENCE: 'https://platform.test/api',
    DATABASE_URL: 'postgresql://u@127.0.0.1/db',
  };
  it('is PLATFORM_CONNECTIONS_KEY, else the key-rotation encryption key; a short one or one without a file is refused', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'connections-key-'));
    const file = join(dir, 'c.yaml');
    await writeFile(file, 'connections: []\n');
    const rotation = {
      PLATFORM_KEY_ROTATION: 'auto',
      PLATFORM_KEY_ENCRYPTION_KEY: 'Zr8Qw2Lp5Xn1Vb7Mk3Tj9Hc4Fd6Gs0Ay2Ue8',
    };
    const load = (env: Record<string, string>) =>
      loadIdpConfig(
        { ...base, PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(), ...env },
        { redisRequired: false },
      );
    expect(
      load({ PLATFORM_CONNECTIONS_FILE: file, PLATFORM_CONNECTIONS_KEY: KEY }).connections?.sealingSecret,
    ).toBe(KEY);
    expect(load({ PLATFORM_CONNECTIONS_FILE: file, ...rotation }).connections?.sealingSecret).toBe(
      rotation.PLATFORM_KEY_ENCRYPTION_KEY,
    );
    expect(() => load({ PLATFORM_CONNECTIONS_FILE: file, PLATFORM_CONNECTIONS_KEY: 'short' })).toThrow(
      /PLATFORM_CONNECTIONS_KEY: is 5 characters/,
    );
    expect(() => load({ PLATFORM_CONNECTIONS_KEY: KEY })).toThrow(
      /PLATFORM_CONNECTIONS_KEY: is set but PLATFORM_CONNECTIONS_FILE is not/,
    );
    expect(load({}).connections).toBeUndefined();
  });
});

describe('the IdP process', () => {
  let db: TestDatabase;
  let dir: string;
  let idp: IdpProcess;
  let user: SeededUser;
  let file: string;
  const one = (name: string) => `  - name: ${name}
    kind: oauth
    authorization_endpoint: http://127.0.0.1:9/authorize
    token_endpoint: http://127.0.0.1:9/token
    client_id: platform
    scopes: [read]
`;

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = await mkdtemp(join(tmpdir(), 'connections-'));
    file = join(dir, 'connections.yaml');
    await writeFile(file, `connections:\n${one('first')}`);
    idp = await startIdpProcess({
      databaseUrl: db.url,
      redisUrl: inject('redisUrl'),
      env: { PLATFORM_CONNECTIONS_FILE: file, PLATFORM_CONNECTIONS_KEY: KEY },
    });
    user = await seedUser(db.pool);
  }, 60_000);
  afterAll(async () => {
    await idp?.stop();
    await db?.drop();
  });

  const names = async () => {
    const { access_token } = await signIn(idp.issuer, user.sessionToken);
    const res = await fetch(`${idp.issuer}/connections`, {
      headers: { authorization: `Bearer ${access_token}` },
    });
    return ((await res.json()) as { connections: Array<{ name: string }> }).connections.map((c) => c.name);
  };

  it('a malformed file stops start-up with one line naming the variable and the problem', async () => {
    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, `connections:\n${one('Bad_Name')}`);
    const p = startPlatform(['idp'], {
      PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
      PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
      PLATFORM_AUDIENCE: 'https://platform.test/api',
      DATABASE_URL: db.url,
      REDIS_URL: inject('redisUrl'),
      PLATFORM_CONNECTIONS_FILE: bad,
      PLATFORM_CONNECTIONS_KEY: KEY,
    });
    expect(await p.exited).not.toBe(0);
    const lines = p.output().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /PLATFORM_CONNECTIONS_FILE: connection 1 \(connections\[0\], line 2\): name: must match/,
    );
  });

  it('without a sealing key start-up stops naming PLATFORM_CONNECTIONS_KEY', async () => {
    const p = startPlatform(['idp'], {
      PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
      PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
      PLATFORM_AUDIENCE: 'https://platform.test/api',
      DATABASE_URL: db.url,
      REDIS_URL: inject('redisUrl'),
      PLATFORM_CONNECTIONS_FILE: file,
    });
    expect(await p.exited).not.toBe(0);
    expect(p.output()).toMatch(/PLATFORM_CONNECTIONS_KEY: is required with PLATFORM_CONNECTIONS_FILE/);
  });

  it('SIGHUP: a bad file keeps the connections in force (one line); a good one replaces them', async () => {
    expect(await names()).toEqual(['first']);
    await writeFile(file, 'connections:\n  - name: second\n    kind: oauth\n');
    idp.child.kill('SIGHUP');
    await idp.waitFor(/connections not reloaded, the previous ones stay in force: connection 1/);
    expect(await names()).toEqual(['first']);
    await writeFile(file, `connections:\n${one('first')}${one('second')}`);
    idp.child.kill('SIGHUP');
    await idp.waitFor(/"connections":2,"msg":"connections reloaded"/);
    expect(await names()).toEqual(['first', 'second']);
  });
});
