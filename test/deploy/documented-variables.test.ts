// Every variable docs/reference.md lists for a server process reaches that process when the operator sets it the
// documented way, in each of the three deployments, as their own tools render them (no engine, no cluster):
//   - compose: a deploy/.env entry, `docker-compose config`;
//   - Swarm: the shell's environment, `docker stack config -c stack.yaml -c stack.key-rotation.yaml`;
//   - Kubernetes: a key merged into the component's ConfigMap by an overlay, `kubectl kustomize` (with the
//     key-rotation Component).
// The list is read from the reference itself (deploy/doctor/documented-variables.ts), so a variable added to the
// reference without its plumbing fails here; so does a variable a config module reads that the reference lacks.
// Each file-valued setting must name a folder the container mounts.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import {
  concreteNames,
  containersOf,
  type DocumentedVariable,
  documentedVariables,
  FILE_MOUNTS,
  isFileValued,
  PROVISIONS,
  type Provision,
  readReference,
  secretVariables,
} from '../../deploy/doctor/documented-variables.ts';
import { DEPLOY_DIR, envFile, REPO_DIR } from './support.ts';

type Target = 'compose' | 'swarm' | 'kubernetes';
type Env = Record<string, string>;
// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are plain JSON, read field by field below.
type Obj = any;

const reference = readReference();
const variables = documentedVariables(reference);
const secrets = new Set(secretVariables(reference));
const ORIGIN = 'https://app.example.com';

/** The value the operator sets for a variable: unique, so it can only have come from that setting. */
const sentinel = (name: string) => SHAPED[name] ?? `set-${name.toLowerCase().replaceAll('_', '-')}`;
// Settings the deployment files themselves read get a value of the right shape (compose checks a subnet).
const SHAPED: Record<string, string> = { FRONT_SUBNET: '172.16.241.0/24' };

function provision(target: Target, v: DocumentedVariable): Provision | undefined {
  return PROVISIONS[`${target}:${v.name}`] ?? PROVISIONS[`${v.process}:${v.name}`] ?? PROVISIONS[v.name];
}

/** The `.env` / shell / ConfigMap entries that set every pass-through variable to its sentinel. */
function operatorSettings(target: Target): Env {
  const out: Env = {};
  for (const v of variables) {
    const p = provision(target, v);
    if (p?.kind === 'set' || p?.kind === 'other') continue;
    if (target !== 'compose' && secrets.has(v.name)) continue;
    for (const c of containersOf(v.process))
      for (const name of concreteNames(v, c))
        if (p?.kind === 'from') out[p.env] = sentinel(p.env);
        else out[name] = sentinel(name);
  }
  return out;
}

interface Rendered {
  /** Each container's environment (Kubernetes: its env entries and its ConfigMaps' keys). */
  env: Record<string, Env>;
  /** Each container's mounted paths inside the container, and (compose, Swarm) the host folder. */
  mounts: Record<string, Array<{ target: string; source?: string }>>;
  /** Each container's `<NAME>_FILE` paths that a secret is mounted at. */
  secretPaths: Record<string, Set<string>>;
}

const scratch = mkdtempSync(join(tmpdir(), 'documented-variables-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function renderCompose(settings: Env): Rendered {
  const example = envFile(readFileSync(join(DEPLOY_DIR, 'env.example'), 'utf8'));
  const env = { ...example, ...settings };
  const file = join(scratch, 'compose.env');
  writeFileSync(
    file,
    Object.entries(env)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(''),
  );
  const out = execFileSync(
    'docker-compose',
    ['--env-file', file, '-f', join(DEPLOY_DIR, 'compose.yaml'), 'config'],
    { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: process.env.HOME } },
  );
  const services = (parse(out) as { services: Record<string, Obj> }).services;
  const r: Rendered = { env: {}, mounts: {}, secretPaths: {} };
  for (const [name, s] of Object.entries(services)) {
    r.env[name] = Object.fromEntries(
      Object.entries((s.environment ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(v ?? '')]),
    );
    // docker-compose 1.29 writes bind mounts as `<absolute source>:<target>[:ro]`.
    r.mounts[name] = (s.volumes ?? []).map((m: Obj) => {
      const [source, target] = typeof m === 'string' ? m.split(':') : [m.source, m.target];
      return { target: target!, source: source && relative(DEPLOY_DIR, source) };
    });
    r.secretPaths[name] = new Set();
  }
  return r;
}

function renderSwarm(settings: Env): Rendered {
  const out = execFileSync(
    'docker',
    ['stack', 'config', '-c', 'stack.yaml', '-c', 'stack.key-rotation.yaml'],
    {
      cwd: DEPLOY_DIR,
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        PLATFORM_SECRETS_DIR: '/srv/platform/secrets',
        PUBLIC_BASE_URL: ORIGIN,
        PLATFORM_OIDC_ISSUER: ORIGIN,
        PLATFORM_AUDIENCE: ORIGIN,
        FRONT_SUBNET: '172.16.240.0/24',
        ...settings,
      },
    },
  );
  const services = (parse(out) as { services: Record<string, Obj> }).services;
  const r: Rendered = { env: {}, mounts: {}, secretPaths: {} };
  for (const [name, s] of Object.entries(services)) {
    r.env[name] = Object.fromEntries(
      Object.entries((s.environment ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(v ?? '')]),
    );
    r.mounts[name] = (s.volumes ?? []).map((m: Obj) => ({
      target: m.target,
      source: m.source && relative(DEPLOY_DIR, m.source),
    }));
    r.secretPaths[name] = new Set((s.secrets ?? []).map((x: Obj) => `/run/secrets/${x.target}`));
  }
  return r;
}

const COMPONENT_CONFIGMAP: Record<string, string> = { idp: 'platform-idp', gateway: 'platform-gateway' };
const configMapOf = (container: string) => COMPONENT_CONFIGMAP[container] ?? 'platform-tools';

function renderKubernetes(settings: Record<string, Env>): Rendered {
  const overlay = mkdtempSync(join(scratch, 'overlay-'));
  const base = relative(overlay, `${REPO_DIR}deploy/kubernetes`);
  const generators = Object.entries(settings).map(
    ([name, env]) =>
      `  - name: ${name}\n    behavior: merge\n    literals:\n${Object.entries(env)
        .map(([k, v]) => `      - ${k}=${v}\n`)
        .join('')}`,
  );
  writeFileSync(
    join(overlay, 'kustomization.yaml'),
    `resources:\n  - ${base}\ncomponents:\n  - ${base}/key-rotation\nconfigMapGenerator:\n${generators.join('')}`,
  );
  const out = execFileSync('kubectl', ['kustomize', overlay], { encoding: 'utf8' });
  const objs: Obj[] = parseAllDocuments(out).map((d) => d.toJSON());
  const r: Rendered = { env: {}, mounts: {}, secretPaths: {} };
  for (const d of objs.filter((o) => o.kind === 'Deployment')) {
    const spec = d.spec.template.spec;
    const c = spec.containers[0];
    const env: Env = {};
    for (const from of c.envFrom ?? []) {
      const cm = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === from.configMapRef?.name);
      Object.assign(env, cm?.data ?? {});
    }
    // An env entry wins over envFrom (Kubernetes' own precedence).
    for (const e of c.env ?? []) env[e.name] = e.value ?? '';
    r.env[d.metadata.name] = env;
    const volumes = new Map<string, Obj>(spec.volumes.map((v: Obj) => [v.name, v]));
    r.mounts[d.metadata.name] = c.volumeMounts.map((m: Obj) => ({ target: m.mountPath }));
    const paths = new Set<string>();
    for (const m of c.volumeMounts) {
      const v = volumes.get(m.name);
      if (v?.secret === undefined) continue;
      if (v.secret.items === undefined) paths.add(`${m.mountPath}/*`);
      for (const item of v.secret.items ?? []) paths.add(`${m.mountPath}/${item.path}`);
    }
    r.secretPaths[d.metadata.name] = paths;
  }
  return r;
}

/** Each ConfigMap's settings: a variable goes to the ConfigMap its process reads. */
function kubernetesSettings(): Record<string, Env> {
  const out: Record<string, Env> = {};
  for (const v of variables) {
    const p = provision('kubernetes', v);
    if (p?.kind === 'set' || p?.kind === 'other') continue;
    for (const c of containersOf(v.process)) {
      const cm = configMapOf(c);
      out[cm] ??= {};
      // A secret: a key of the component's Secret (mounted whole), named by <NAME>_FILE in the ConfigMap.
      for (const name of concreteNames(v, c))
        if (secrets.has(v.name)) out[cm][`${name}_FILE`] = `/run/secrets/platform/${sentinel(name)}`;
        else out[cm][name] = sentinel(name);
    }
  }
  return out;
}

/** Whether a path is a mounted secret: an item, or a file of a Secret mounted whole (`<dir>/*`). */
function mountedSecret(paths: Set<string>, file: string): boolean {
  return paths.has(file) || paths.has(`${file.slice(0, file.lastIndexOf('/'))}/*`);
}

/** What is wrong with how a rendering hands one documented variable to one container. */
function problems(target: Target, r: Rendered, v: DocumentedVariable, container: string): string[] {
  const env = r.env[container];
  if (env === undefined) return [`${target}: no container ${container}`];
  const p = provision(target, v);
  if (p?.kind === 'other') return [];
  const out: string[] = [];
  for (const name of concreteNames(v, container)) {
    const where = `${target} ${container} ${name}`;
    const given = env[name] ?? '';
    const file = env[`${name}_FILE`] ?? '';
    if (p?.kind === 'set') {
      if (given === '' && file === '') out.push(`${where}: the deployment should set it (${p.why})`);
      continue;
    }
    if (target !== 'compose' && secrets.has(v.name)) {
      // Swarm and Kubernetes hand secrets over as files only.
      if (given !== '') out.push(`${where}: a secret in the environment`);
      else if (!mountedSecret(r.secretPaths[container]!, file))
        out.push(`${where}: not given as ${name}_FILE naming a mounted secret`);
      continue;
    }
    const expected = p?.kind === 'from' && target !== 'kubernetes' ? sentinel(p.env) : sentinel(name);
    if (given !== expected)
      out.push(
        `${where}: set to ${expected} the documented way, the container gets ${JSON.stringify(given)}`,
      );
    if (isFileValued(name)) {
      const mount = FILE_MOUNTS[name];
      if (mount === undefined) out.push(`${where}: a file-valued setting with no documented mount`);
      else if (
        !r.mounts[container]!.some(
          (m) => m.target === mount.path && (target === 'kubernetes' || m.source === mount.source.slice(2)),
        )
      )
        out.push(`${where}: ${mount.source} is not mounted at ${mount.path}`);
    }
  }
  return out;
}

function allProblems(target: Target, r: Rendered): string[] {
  return variables.flatMap((v) => containersOf(v.process).flatMap((c) => problems(target, r, v, c)));
}

describe('docs/reference.md, read as the deployment reads it', () => {
  it('lists the servers’ variables, families and secrets', () => {
    const names = (p: string) => variables.filter((v) => v.process === p).map((v) => v.name);
    expect(names('idp')).toEqual(
      expect.arrayContaining(['PLATFORM_ENTITLEMENTS', 'PLATFORM_AUTHJS_ACCOUNTS_TABLE']),
    );
    expect(names('gateway')).toEqual(
      expect.arrayContaining(['<SERVICE>_MCP_UPSTREAM', 'GATEWAY_REVOCATION_MODE']),
    );
    expect(names('tool')).toEqual(expect.arrayContaining(['DEALS_ENTITY_SQL', 'TOOL_IDENTITY_KEY']));
    expect([...secrets]).toEqual(
      expect.arrayContaining(['PLATFORM_OIDC_PRIVATE_KEY', 'GRAPH_CLIENT_SECRET']),
    );
  });

  it('reads names, `…_` shorthands and <SERVICE>_ families, and refuses a family it cannot expand', () => {
    const text = [
      '### IdP (`platform idp`)',
      '| variable | meaning | default |',
      '|---|---|---|',
      '| `PLATFORM_A_USERS_TABLE`, `…_ROLES_TABLE` | x | y |',
      '### Gateway (`platform gateway`)',
      '| `<SERVICE>_UPSTREAM_CONNECTION`, `GATEWAY_X` | x | y |',
      '### Telemetry (every server process)',
      '| `OTEL_SERVICE_NAME` | x | y |',
      '### Deployment (`deploy/.env`, read by compose only)',
      '| `NOT_A_SERVER_VARIABLE` | x |',
    ].join('\n');
    expect(documentedVariables(text)).toEqual([
      { name: 'PLATFORM_A_USERS_TABLE', process: 'idp' },
      { name: 'PLATFORM_A_ROLES_TABLE', process: 'idp' },
      { name: '<SERVICE>_UPSTREAM_CONNECTION', process: 'gateway' },
      { name: 'GATEWAY_X', process: 'gateway' },
      { name: 'OTEL_SERVICE_NAME', process: 'idp' },
      { name: 'OTEL_SERVICE_NAME', process: 'gateway' },
      { name: 'OTEL_SERVICE_NAME', process: 'tool' },
    ]);
    expect(() => documentedVariables('### IdP (`platform idp`)\n| `OTEL_*` | x | y |')).toThrow(
      /cannot expand/,
    );
  });

  it('documents every variable the servers’ config modules read', () => {
    const documented = new Set(variables.map((v) => v.name));
    const missing: string[] = [];
    for (const [file, process] of [
      ['idp/config.ts', 'idp'],
      ['gateway/config.ts', 'gateway'],
      ['tools/config.ts', 'tool'],
    ] as const) {
      const text = readFileSync(join(REPO_DIR, file), 'utf8');
      for (const m of text.matchAll(/'([A-Z][A-Z0-9]*_[A-Z0-9_]+)'/g)) {
        const name = m[1]!;
        // A tool server names the gateway's secret only to refuse it.
        if (process === 'tool' && name.startsWith('GATEWAY_IDENTITY_SECRET')) continue;
        if (!documented.has(name) && !variables.some((v) => v.name.endsWith(name.replace(/^[A-Z]+_/, '_'))))
          if (!missing.includes(`${file}: ${name}`)) missing.push(`${file}: ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe.each([
  ['compose', () => renderCompose(operatorSettings('compose'))],
  ['swarm', () => renderSwarm(operatorSettings('swarm'))],
  ['kubernetes', () => renderKubernetes(kubernetesSettings())],
] as const)('%s: every documented variable set the documented way reaches its process', (target, render) => {
  let rendered: Rendered;
  beforeAll(() => {
    rendered = render();
  });

  it('hands each container every variable of its process, and mounts every file-valued setting', () => {
    expect(allProblems(target, rendered)).toEqual([]);
  });

  it('fails for a variable added to the reference without its plumbing', () => {
    const unplumbed: DocumentedVariable = { name: 'PLATFORM_NOT_PLUMBED', process: 'idp' };
    expect(problems(target, rendered, unplumbed, 'idp')).toHaveLength(1);
    const family: DocumentedVariable = { name: '<SERVICE>_NOT_PLUMBED', process: 'gateway' };
    expect(problems(target, rendered, family, 'gateway')).toHaveLength(3);
    const file: DocumentedVariable = { name: 'PLATFORM_NOT_MOUNTED_DIR', process: 'idp' };
    expect(
      problems(
        target,
        {
          ...rendered,
          env: { ...rendered.env, idp: { PLATFORM_NOT_MOUNTED_DIR: sentinel('PLATFORM_NOT_MOUNTED_DIR') } },
        },
        file,
        'idp',
      ),
    ).toEqual([expect.stringContaining('no documented mount')]);
  });
});
