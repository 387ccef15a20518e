// `platform doctor --compose`'s row "documented settings reach it": a variable docs/reference.md lists for a
// server that deploy/.env sets must be in every running container of that server. The compose file and .env are
// the real ones (deploy/compose.yaml, env.example plus the operator's lines, read by the doctor's own loader);
// each container's environment is what `docker-compose config` renders for it, as `up` would create it, from
// the .env of the moment the container was created.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { checkSettingsReach } from '../../deploy/doctor/checks/settings.ts';
import { type ComposeTarget, type Container, openCompose } from '../../deploy/doctor/compose.ts';
import { DEPLOY_DIR, envFile } from './support.ts';

const dir = mkdtempSync(join(tmpdir(), 'doctor-settings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const example = envFile(readFileSync(join(DEPLOY_DIR, 'env.example'), 'utf8'));

function writeEnv(env: Record<string, string>): void {
  writeFileSync(
    join(dir, '.env'),
    Object.entries(env)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(''),
  );
}

/** Each service's environment as compose creates its container with the .env and compose file of now. */
function rendered(): Record<string, Record<string, string>> {
  const out = execFileSync('docker-compose', ['-f', join(dir, 'compose.yaml'), 'config'], {
    cwd: dir,
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
  });
  const services = (parse(out) as { services: Record<string, { environment?: Record<string, unknown> }> })
    .services;
  return Object.fromEntries(
    Object.entries(services).map(([name, s]) => [
      name,
      Object.fromEntries(
        // `config` writes a `$` of a value as `$$` (escaped for compose); the container gets one.
        Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v ?? '').replaceAll('$$', '$')]),
      ),
    ]),
  );
}

/** The deployment as the doctor sees it: its file and .env, with containers created from `envs`. */
function deployment(envs: Record<string, Record<string, string>>): ComposeTarget {
  const t = openCompose({
    file: join(dir, 'compose.yaml'),
    project: 'p',
    docker: 'docker',
    timeoutMs: 10_000,
    env: {},
  });
  const container = (service: string): Container => ({
    id: `id-${service}`,
    name: `p-${service}-1`,
    service,
    running: true,
    health: 'healthy',
    env: new Map(Object.entries(envs[service] ?? {})),
    image: 'platform-identity:latest',
  });
  return { ...t, containers: async (service) => (envs[service] ? [container(service)] : []) };
}

const verdicts = (rows: Awaited<ReturnType<typeof checkSettingsReach>>) =>
  Object.fromEntries(rows.map((r) => [r.subject, r.verdict]));

describe('platform doctor --compose: documented settings reach the containers', () => {
  copyFileSync(join(DEPLOY_DIR, 'compose.yaml'), join(dir, 'compose.yaml'));
  const operator = {
    ...example,
    PLATFORM_ENTITLEMENTS: 'managed',
    GATEWAY_REVOCATION_MODE: 'fail-closed',
    DEALS_ENTITY_SQL: 'select entity from deals where id = $1',
  };

  it('PASSes when every container was created with the .env as it is', async () => {
    writeEnv(operator);
    const rows = await checkSettingsReach(deployment(rendered()));
    expect(verdicts(rows)).toEqual({
      idp: 'PASS',
      gateway: 'PASS',
      'tool-platform': 'PASS',
      'tool-mail': 'PASS',
      'tool-deals': 'PASS',
    });
  });

  it('names the variable .env sets that a running container lacks (created before the line was added)', async () => {
    writeEnv(example);
    const before = rendered();
    writeEnv(operator);
    const rows = await checkSettingsReach(deployment(before));
    const idp = rows.find((r) => r.subject === 'idp')!;
    expect(idp.verdict).toBe('FAIL');
    expect(idp.detail).toContain('p-idp-1 lacks PLATFORM_ENTITLEMENTS');
    expect(idp.detail).not.toContain('managed');
    expect(rows.find((r) => r.subject === 'gateway')!.detail).toContain('lacks GATEWAY_REVOCATION_MODE');
    expect(rows.find((r) => r.subject === 'tool-deals')!.detail).toContain('lacks DEALS_ENTITY_SQL');
    expect(rows.find((r) => r.subject === 'tool-platform')!.verdict).toBe('PASS');
  });

  it('names it when the compose file does not pass it at all', async () => {
    writeFileSync(
      join(dir, 'compose.yaml'),
      readFileSync(join(DEPLOY_DIR, 'compose.yaml'), 'utf8').replace(/^ {6}PLATFORM_ENTITLEMENTS: .*\n/m, ''),
    );
    writeEnv(operator);
    const rows = await checkSettingsReach(deployment(rendered()));
    expect(rows.find((r) => r.subject === 'idp')).toMatchObject({ verdict: 'FAIL' });
    expect(rows.find((r) => r.subject === 'idp')!.detail).toContain('lacks PLATFORM_ENTITLEMENTS');
    copyFileSync(join(DEPLOY_DIR, 'compose.yaml'), join(dir, 'compose.yaml'));
  });
});
