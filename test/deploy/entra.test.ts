// The Entra app registration: the Graph body register.sh creates meets every row of the spec's App
// registration table, and the scripts themselves run end to end against a stand-in `az` (no Azure here):
// the secret reaches the vault exactly (stderr kept apart), a corrupted capture is refused, and verify.sh
// reports every row.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  connectorApplication,
  GRAPH_APP_ID,
  requiredAccessWithOwnScope,
} from '../../deploy/entra/application.ts';
import { checkRegistration } from '../../deploy/entra/check-registration.ts';
import { APP_ID, SECRET, TENANT, USER_READ_ID } from './fake-az.ts';
import { DEPLOY_DIR } from './support.ts';

const BASE = 'https://app.example.com';
const CALLBACKS = ['https://claude.ai/api/mcp/auth_callback', 'https://claude.com/api/mcp/auth_callback'];
const SCOPE_ID = '0f0f0f0f-1e1e-2d2d-3c3c-4b4b4b4b4b4b';

function rendered() {
  return connectorApplication({
    service: 'platform',
    baseUrl: BASE,
    callbacks: CALLBACKS,
    scopeId: SCOPE_ID,
    userReadId: USER_READ_ID,
  });
}

const twoYears = () => {
  const start = new Date('2026-01-01T00:00:00Z');
  return [{ startDateTime: start.toISOString(), endDateTime: '2028-01-01T00:00:00Z' }];
};
const consented = [
  { consentType: 'AllPrincipals', scope: 'User.Read' },
  { consentType: 'AllPrincipals', scope: 'mcp.access' },
];
const want = { service: 'platform', baseUrl: BASE, userReadId: USER_READ_ID, callbacks: CALLBACKS };

describe('the connector application body', () => {
  it('meets every row of the App registration table and checks #11-#13', () => {
    const app = {
      ...rendered(),
      ...requiredAccessWithOwnScope({ appId: APP_ID, scopeId: SCOPE_ID, userReadId: USER_READ_ID }),
      passwordCredentials: twoYears(),
    };
    const rows = checkRegistration(
      { app, servicePrincipalExists: true, grants: consented, secretLength: 40 },
      want,
    );
    expect(rows.filter((r) => r.verdict !== 'PASS')).toEqual([]);
    expect(rows.map((r) => r.ref).sort()).toEqual(
      ['#11', '#11', '#12', '#13', 'R1', 'R4', 'R5', 'R6', 'R7', 'R8', 'R9'].sort(),
    );
    expect(app.requiredResourceAccess.map((r) => r.resourceAppId)).toEqual([GRAPH_APP_ID, APP_ID]);
  });

  it('is the same for every service but for the names (no registration differs from another)', () => {
    const strip = (service: string) =>
      JSON.parse(
        JSON.stringify(
          connectorApplication({
            service,
            baseUrl: BASE,
            callbacks: CALLBACKS,
            scopeId: SCOPE_ID,
            userReadId: USER_READ_ID,
          }),
        ).replaceAll(service, 'S'),
      );
    expect(strip('mail')).toEqual(strip('platform'));
    expect(strip('deals')).toEqual(strip('platform'));
  });

  it('flags each way a live registration can be wrong', () => {
    const app = rendered() as unknown as Record<string, unknown> & { api: Record<string, unknown> };
    app.signInAudience = 'AzureADMultipleOrgs';
    app.api = { ...app.api, requestedAccessTokenVersion: null };
    app.identifierUris = ['api://platform'];
    const rows = checkRegistration(
      {
        app,
        servicePrincipalExists: false,
        grants: [{ consentType: 'Principal', scope: 'User.Read' }],
        secretLength: 270,
      },
      want,
    );
    const failed = Object.fromEntries(
      rows.filter((r) => r.verdict === 'FAIL').map((r) => [r.name, r.detail]),
    );
    expect(Object.keys(failed).sort()).toEqual(
      [
        'single-tenant sign-in audience',
        'service principal exists',
        'identifier URI in URL form',
        'access token version 2',
        'client secret valid 2 years',
        'vault secret 40-50 characters',
        'tenant admin consent',
      ].sort(),
    );
    expect(failed['vault secret 40-50 characters']).toContain('stderr captured with the secret');
  });

  it('refuses options that cannot make a valid registration', () => {
    const base = {
      service: 'platform',
      baseUrl: BASE,
      callbacks: CALLBACKS,
      scopeId: SCOPE_ID,
      userReadId: USER_READ_ID,
    };
    expect(() => connectorApplication({ ...base, baseUrl: 'http://app.example.com' })).toThrow(/https/);
    expect(() => connectorApplication({ ...base, callbacks: [CALLBACKS[0]!] })).toThrow(/two callback/);
    expect(() => connectorApplication({ ...base, scopeId: 'x' })).toThrow(/--scope-id/);
  });
});

describe('register.sh and verify.sh against a stand-in az', () => {
  let dir: string;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function setup(): Promise<{ env: Record<string, string>; state: string }> {
    dir = await mkdtemp(join(tmpdir(), 'platform-entra-'));
    const bin = join(dir, 'bin');
    const state = join(dir, 'state');
    await Promise.all([
      import('node:fs/promises').then((f) => f.mkdir(bin)),
      import('node:fs/promises').then((f) => f.mkdir(state)),
    ]);
    const fake = new URL('./fake-az.ts', import.meta.url).pathname;
    await writeFile(join(bin, 'az'), `#!/bin/sh\nexec "${process.execPath}" "${fake}" "$@"\n`, {
      mode: 0o755,
    });
    return {
      state,
      env: {
        PATH: `${bin}:${dirname(process.execPath)}:${process.env.PATH}`,
        FAKE_AZ_STATE: state,
        CONSENT_RETRY_SECONDS: '0',
      },
    };
  }

  function run(script: string, args: string[], env: Record<string, string>) {
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn('bash', [join(DEPLOY_DIR, 'entra', script), ...args], { env });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d));
      child.stderr.on('data', (d: Buffer) => (stderr += d));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  }

  const registerArgs = [
    '--service',
    'platform',
    '--base-url',
    `${BASE}/`,
    '--callback',
    CALLBACKS[0]!,
    '--callback',
    CALLBACKS[1]!,
    '--vault',
    'kv-test',
  ];

  it('registers row by row, stores exactly the secret, and verify.sh then passes every row', async () => {
    const { env, state } = await setup();
    const r = await run('register.sh', registerArgs, env);
    expect(r.stderr).not.toContain('fake az: unexpected');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`IDP_TENANT_ID=${TENANT}`);
    expect(r.stdout).toContain(`PLATFORM_MCP_CLIENT_ID=${APP_ID}`);
    // stdout only: az's warning (on stderr) is not part of what reached the vault.
    expect(await readFile(join(state, 'vault-platform-mcp-client-secret'), 'utf8')).toBe(SECRET);
    const calls = (await readFile(join(state, 'calls.log'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as string[]);
    const call = (prefix: string) => calls.filter((c) => c.join(' ').startsWith(prefix));
    expect(call('ad app credential reset')[0]).toEqual(expect.arrayContaining(['--years', '2', '--append']));
    expect(call('keyvault secret set')[0]).toEqual(expect.arrayContaining(['--file']));
    expect(calls.flat()).not.toContain('--value');
    expect(calls.flat()).not.toContain(SECRET);
    expect(call('ad sp create')).toHaveLength(1);
    expect(call('ad app permission admin-consent')).toHaveLength(2);
    const created = JSON.parse(await readFile(join(state, 'app.json'), 'utf8')) as {
      identifierUris: string[];
    };
    expect(created.identifierUris).toEqual([`${BASE}/platform/mcp`]);

    const v = await run(
      'verify.sh',
      [
        '--service',
        'platform',
        '--base-url',
        BASE,
        '--vault',
        'kv-test',
        '--callback',
        CALLBACKS[0]!,
        '--callback',
        CALLBACKS[1]!,
      ],
      env,
    );
    expect(v.code, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toMatch(/summary: PASS 11 \/ FAIL 0 \/ SKIP 0/);

    const again = await run('register.sh', registerArgs, env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('exists already');
  });

  it('refuses to store a secret that captured more than the secret', async () => {
    const { env, state } = await setup();
    const r = await run('register.sh', registerArgs, { ...env, FAKE_AZ_MIXED: '1' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/captured client secret is \d+ characters, expected 40 to 50: not stored/);
    const calls = await readFile(join(state, 'calls.log'), 'utf8');
    expect(calls).not.toContain('keyvault');
  });

  it('answers a missing argument with its usage and exit 2', async () => {
    const { env } = await setup();
    const r = await run('register.sh', ['--service', 'platform'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--vault');
  });
});
