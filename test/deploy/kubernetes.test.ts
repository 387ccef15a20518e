// The Kubernetes base (deploy/kubernetes, kustomize): rendered with `kubectl kustomize`, every object validated
// offline against the Kubernetes schemas (kubernetes-models), then the rules the base promises checked one by
// one. No cluster is involved: this machine cannot run one. Each rule is a function returning its problems, and
// each is also run against a copy of the rendering broken on purpose, so a rule that stopped looking would fail.
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { loadIdpConfig } from '../../idp/config.ts';
import { SHUTDOWN_LINGER_MS } from '../../lib/lifecycle.ts';
import { REPO_DIR, withMountedFiles } from './support.ts';

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are plain JSON, checked field by field below.
type Obj = any;

const KUBECTL = process.env.KUBECTL ?? 'kubectl';
const SECRET_VARIABLES = [
  'PLATFORM_OIDC_PRIVATE_KEY',
  'PLATFORM_KEY_ENCRYPTION_KEY',
  'GATEWAY_IDENTITY_SECRET',
  'TOOL_IDENTITY_KEY',
  'GRAPH_CLIENT_SECRET',
  'DATABASE_URL',
  'REDIS_URL',
  'PLATFORM_TOKEN',
];
const isSecretVariable = (name: string) =>
  SECRET_VARIABLES.includes(name) || /_MCP_SHARED_SECRET$/.test(name);
const SERVERS = ['idp', 'gateway', 'tool-platform', 'tool-mail', 'tool-deals'];
// The longest a server takes to stop after SIGTERM: hand kept-alive connections back, drain in-flight requests
// (10 s, lib/lifecycle.ts drain and GATEWAY_SHUTDOWN_GRACE_SECONDS' default), flush the logs (2 s).
const DRAIN_SECONDS = SHUTDOWN_LINGER_MS / 1000 + 10 + 2;

function render(dir = `${REPO_DIR}deploy/kubernetes`): Obj[] {
  const out = execFileSync(KUBECTL, ['kustomize', dir], { encoding: 'utf8' });
  return parseAllDocuments(out).map((d) => d.toJSON());
}

/** An overlay of the base with the given components (paths under deploy/kubernetes), as an operator writes one. */
function renderWith(scratch: string, ...components: string[]): Obj[] {
  const overlay = mkdtempSync(join(scratch, 'overlay-'));
  // kustomize takes only relative paths to the base and its components.
  const base = relative(overlay, `${REPO_DIR}deploy/kubernetes`);
  writeFileSync(
    join(overlay, 'kustomization.yaml'),
    `resources:\n  - ${base}\ncomponents:\n${components.map((c) => `  - ${base}/${c}\n`).join('')}`,
  );
  return render(overlay);
}

const byKind = (objs: Obj[], kind: string): Obj[] => objs.filter((o) => o.kind === kind);
const workloads = (objs: Obj[]): Obj[] => objs.filter((o) => o.kind === 'Deployment' || o.kind === 'Job');
const podSpec = (w: Obj): Obj => w.spec.template.spec;
const named = (objs: Obj[], kind: string, name: string): Obj =>
  objs.find((o) => o.kind === kind && o.metadata.name === name);

/** kubernetes-models' class for an apiVersion/kind, e.g. apps/v1 Deployment → kubernetes-models/apps/v1/Deployment. */
async function modelFor(apiVersion: string, kind: string): Promise<new (o: Obj) => { validate(): void }> {
  const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
  return mod[kind] ?? mod.default;
}

async function validationProblems(objs: Obj[]): Promise<string[]> {
  const problems: string[] = [];
  for (const o of objs) {
    const Model = await modelFor(o.apiVersion, o.kind);
    try {
      new Model(o).validate();
    } catch (err) {
      problems.push(`${o.kind}/${o.metadata?.name}: ${(err as Error).message}`);
    }
  }
  return problems;
}

function probeProblems(objs: Obj[]): string[] {
  const problems: string[] = [];
  for (const d of byKind(objs, 'Deployment')) {
    for (const c of podSpec(d).containers) {
      // Readiness follows the dependencies; start-up and liveness only the process (a database outage must not
      // restart every pod).
      const paths: Record<string, string> = {
        startupProbe: '/health/live',
        readinessProbe: '/health/ready',
        livenessProbe: '/health/live',
      };
      for (const [probe, path] of Object.entries(paths)) {
        const p = c[probe];
        if (p?.httpGet?.path !== path || p.httpGet.port !== 'http')
          problems.push(`${d.metadata.name}/${c.name}: ${probe} is not GET ${path} on port http`);
      }
      if (!c.ports?.some((p: Obj) => p.name === 'http' && p.containerPort === 3000))
        problems.push(`${d.metadata.name}/${c.name}: no port http = 3000`);
    }
  }
  return problems;
}

function securityProblems(objs: Obj[]): string[] {
  const problems: string[] = [];
  for (const w of workloads(objs)) {
    const s = podSpec(w);
    const at = `${w.kind}/${w.metadata.name}`;
    if (s.securityContext?.runAsNonRoot !== true) problems.push(`${at}: pod runAsNonRoot is not true`);
    if (s.securityContext?.seccompProfile?.type !== 'RuntimeDefault') problems.push(`${at}: pod seccomp`);
    if (s.hostNetwork || s.hostPID || s.hostIPC) problems.push(`${at}: shares a host namespace`);
    if (s.automountServiceAccountToken !== false) problems.push(`${at}: mounts a service-account token`);
    if (s.volumes?.some((v: Obj) => v.hostPath)) problems.push(`${at}: hostPath volume`);
    for (const c of [...(s.initContainers ?? []), ...s.containers]) {
      const x = c.securityContext ?? {};
      if (x.allowPrivilegeEscalation !== false) problems.push(`${at}/${c.name}: allowPrivilegeEscalation`);
      if (x.readOnlyRootFilesystem !== true) problems.push(`${at}/${c.name}: root filesystem writable`);
      if (x.runAsNonRoot !== true) problems.push(`${at}/${c.name}: runAsNonRoot is not true`);
      if (x.privileged) problems.push(`${at}/${c.name}: privileged`);
      if (JSON.stringify(x.capabilities?.drop) !== '["ALL"]' || x.capabilities?.add?.length)
        problems.push(`${at}/${c.name}: capabilities not drop ALL`);
      if (x.seccompProfile?.type !== 'RuntimeDefault') problems.push(`${at}/${c.name}: seccomp`);
      if (x.runAsUser === 0) problems.push(`${at}/${c.name}: runs as root`);
    }
  }
  return problems;
}

/**
 * No secret value in the manifests: no Secret objects with data, no ConfigMap key or env value for a secret
 * variable, and every `<NAME>_FILE` points at a key of a Secret volume mounted in that container.
 */
function secretProblems(objs: Obj[]): string[] {
  const problems: string[] = [];
  for (const s of byKind(objs, 'Secret'))
    problems.push(`Secret/${s.metadata.name} is in the base (values inline)`);
  for (const m of byKind(objs, 'ConfigMap')) {
    for (const k of Object.keys(m.data ?? {}))
      if (isSecretVariable(k)) problems.push(`ConfigMap/${m.metadata.name} holds ${k}`);
  }
  for (const w of workloads(objs)) {
    const s = podSpec(w);
    for (const c of s.containers) {
      const at = `${w.kind}/${w.metadata.name}/${c.name}`;
      for (const e of c.env ?? []) {
        if (isSecretVariable(e.name) && e.valueFrom?.secretKeyRef === undefined)
          problems.push(`${at}: ${e.name} is not a secretKeyRef`);
        const file = /^(.*)_FILE$/.exec(e.name);
        if (!file || !isSecretVariable(file[1]!)) continue;
        const mount = (c.volumeMounts ?? []).find((m: Obj) => e.value?.startsWith(`${m.mountPath}/`));
        const volume = mount && s.volumes.find((v: Obj) => v.name === mount.name);
        const key = mount && e.value.slice(mount.mountPath.length + 1);
        if (!volume?.secret?.secretName) problems.push(`${at}: ${e.name} is not in a mounted Secret`);
        else if (volume.secret.items && !volume.secret.items.some((i: Obj) => i.path === key))
          problems.push(`${at}: ${e.name} names ${key}, not an item of Secret ${volume.secret.secretName}`);
      }
    }
  }
  return problems;
}

/** The secrets each component gets: its own Secret, and never another component's. */
function secretsOf(objs: Obj[], kind: string, name: string): { secrets: string[]; variables: string[] } {
  const s = podSpec(named(objs, kind, name));
  return {
    secrets: s.volumes.filter((v: Obj) => v.secret).map((v: Obj) => v.secret.secretName),
    variables: s.containers.flatMap((c: Obj) => (c.env ?? []).map((e: Obj) => e.name)),
  };
}

function availabilityProblems(objs: Obj[]): string[] {
  const problems: string[] = [];
  const pdbs = byKind(objs, 'PodDisruptionBudget');
  for (const d of byKind(objs, 'Deployment')) {
    const at = `Deployment/${d.metadata.name}`;
    const labels = d.spec.template.metadata.labels;
    const matches = (sel: Obj) => Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
    const pdb = pdbs.filter((p) => matches(p.spec.selector));
    if (pdb.length !== 1 || pdb[0].spec.maxUnavailable !== 1)
      problems.push(`${at}: not exactly one PodDisruptionBudget with maxUnavailable 1`);
    if (!(d.spec.replicas > 1))
      problems.push(`${at}: one replica (a PodDisruptionBudget of 1 would block drains)`);
    if (d.spec.strategy?.rollingUpdate?.maxUnavailable !== 0)
      problems.push(`${at}: a rollout may drop a pod first`);
    const s = podSpec(d);
    const spread = s.topologySpreadConstraints ?? [];
    if (!spread.some((t: Obj) => t.topologyKey === 'kubernetes.io/hostname' && matches(t.labelSelector)))
      problems.push(`${at}: no topology spread over nodes`);
    const preStop = Number(s.containers[0].lifecycle?.preStop?.exec?.command?.[1] ?? 0);
    if (!(s.terminationGracePeriodSeconds > preStop + DRAIN_SECONDS))
      problems.push(`${at}: terminationGracePeriodSeconds ≤ preStop ${preStop} s + drain ${DRAIN_SECONDS} s`);
  }
  return problems;
}

/**
 * Whether the NetworkPolicies let a pod with `from` labels reach a pod with `to` labels on `port`; `fromNamespace`:
 * the labels of the sender's namespace when it is another one (undefined: the platform's own namespace).
 */
function allowed(
  objs: Obj[],
  from: Record<string, string>,
  to: Record<string, string>,
  port: number,
  fromNamespace?: Record<string, string>,
): boolean {
  const matches = (sel: Obj, labels: Record<string, string>) =>
    Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v) &&
    (sel.matchExpressions ?? []).every((e: Obj) =>
      e.operator === 'In'
        ? e.values.includes(labels[e.key])
        : e.operator === 'Exists'
          ? e.key in labels
          : false,
    );
  const namedPorts: Record<string, number> = { http: 3000, metrics: 9464 };
  const selecting = byKind(objs, 'NetworkPolicy').filter(
    (p) => p.spec.policyTypes.includes('Ingress') && matches(p.spec.podSelector, to),
  );
  if (selecting.length === 0) return true;
  return selecting.some((p) =>
    (p.spec.ingress ?? []).some(
      (rule: Obj) =>
        (rule.ports === undefined ||
          rule.ports.some((rp: Obj) => (namedPorts[rp.port] ?? rp.port) === port)) &&
        (rule.from === undefined ||
          // A peer without a namespaceSelector is this namespace's pods; with one, the namespaces it selects
          // (an empty selector: every namespace, this one included).
          rule.from.some(
            (peer: Obj) =>
              (peer.namespaceSelector
                ? fromNamespace === undefined || matches(peer.namespaceSelector, fromNamespace)
                : fromNamespace === undefined) &&
              (peer.podSelector === undefined || matches(peer.podSelector, from)),
          )),
    ),
  );
}

const pod = (component: string) => ({
  'app.kubernetes.io/name': 'platform-identity',
  'app.kubernetes.io/component': component,
});
const REDIS = { 'app.kubernetes.io/name': 'redis' };

function networkProblems(objs: Obj[]): string[] {
  const problems: string[] = [];
  const expect = (
    from: string,
    to: string,
    toLabels: Record<string, string>,
    port: number,
    want: boolean,
  ) => {
    const fromLabels = from === 'outside' ? {} : from === 'redis' ? REDIS : pod(from);
    if (allowed(objs, fromLabels, toLabels, port) !== want)
      problems.push(`${from} → ${to}:${port} should be ${want ? 'allowed' : 'refused'}`);
  };
  for (const tool of ['tool-platform', 'tool-mail', 'tool-deals']) {
    expect('gateway', tool, pod(tool), 3000, true);
    for (const other of ['outside', 'idp', 'tool-platform', 'tool-mail', 'tool-deals', 'migrate'])
      if (other !== tool) expect(other, tool, pod(tool), 3000, false);
  }
  for (const client of ['idp', 'gateway']) expect(client, 'redis', REDIS, 6379, true);
  for (const other of ['outside', 'tool-platform', 'tool-mail', 'tool-deals', 'migrate'])
    expect(other, 'redis', REDIS, 6379, false);
  for (const entry of ['idp', 'gateway']) {
    expect('outside', entry, pod(entry), 3000, true);
    expect('outside', entry, pod(entry), 9464, false);
  }
  expect('outside', 'migrate', pod('migrate'), 3000, false);
  // Metrics: Prometheus in this namespace or in `monitoring`; a pod labelled prometheus anywhere else: refused.
  const PROMETHEUS = { 'app.kubernetes.io/name': 'prometheus' };
  const ns = (name: string) => ({ 'kubernetes.io/metadata.name': name });
  for (const [where, namespace, want] of [
    ['here', undefined, true],
    ['monitoring', ns('monitoring'), true],
    ['another namespace', ns('tenant-a'), false],
  ] as const) {
    for (const server of ['idp', 'gateway', 'tool-mail'])
      if (allowed(objs, PROMETHEUS, pod(server), 9464, namespace) !== want)
        problems.push(`prometheus (${where}) → ${server}:9464 should be ${want ? 'allowed' : 'refused'}`);
  }
  if (allowed(objs, pod('tool-deals'), pod('gateway'), 9464))
    problems.push('tool-deals → gateway:9464 should be refused');
  return problems;
}

describe('deploy/kubernetes (offline: rendered and validated, never applied to a cluster here)', () => {
  let objs: Obj[];
  beforeAll(() => {
    objs = render();
  });

  it('renders the servers, the migration Job, Services, PodDisruptionBudgets and NetworkPolicies', () => {
    const names = (kind: string) =>
      byKind(objs, kind)
        .map((o) => o.metadata.name)
        .sort();
    expect(names('Deployment')).toEqual([...SERVERS].sort());
    expect(names('Job')).toEqual(['platform-migrate']);
    // The Service names are the hosts compose uses, so the same upstream URLs work.
    expect(names('Service')).toEqual(['deals', 'gateway', 'idp', 'mail', 'platform']);
    expect(names('PodDisruptionBudget')).toEqual([...SERVERS].sort());
    expect(names('NetworkPolicy').length).toBeGreaterThanOrEqual(4);
    const images = new Set(workloads(objs).flatMap((w) => podSpec(w).containers.map((c: Obj) => c.image)));
    expect([...images]).toEqual(['platform-identity:latest']);
    const args = Object.fromEntries(
      workloads(objs).map((w) => [w.metadata.name, podSpec(w).containers[0].args]),
    );
    expect(args).toEqual({
      'platform-migrate': ['migrate'],
      idp: ['idp'],
      gateway: ['gateway'],
      'tool-platform': ['tool', 'platform'],
      'tool-mail': ['tool', 'mail'],
      'tool-deals': ['tool', 'deals'],
    });
  });

  it('every object validates against the Kubernetes schemas (kubernetes-models)', async () => {
    expect(await validationProblems(objs)).toEqual([]);
    const broken = structuredClone(objs);
    named(broken, 'Deployment', 'gateway').spec.replicas = 'two';
    named(broken, 'Service', 'idp').spec.ports[0].port = '3000';
    expect(await validationProblems(broken)).toHaveLength(2);
  });

  it('every server container has a start-up and a liveness probe on /health/live, a readiness probe on /health/ready', () => {
    expect(probeProblems(objs)).toEqual([]);
    const broken = structuredClone(objs);
    delete podSpec(named(broken, 'Deployment', 'tool-mail')).containers[0].livenessProbe;
    expect(probeProblems(broken)).toEqual([
      'tool-mail/tool-mail: livenessProbe is not GET /health/live on port http',
    ]);
  });

  it('every pod runs restricted: non-root, read-only root, no privilege escalation, drop ALL, RuntimeDefault', () => {
    expect(securityProblems(objs)).toEqual([]);
    const broken = structuredClone(objs);
    podSpec(named(broken, 'Job', 'platform-migrate')).containers[0].securityContext.readOnlyRootFilesystem =
      false;
    podSpec(named(broken, 'Deployment', 'idp')).containers[0].securityContext.capabilities = {
      add: ['NET_ADMIN'],
    };
    expect(securityProblems(broken)).toEqual([
      'Deployment/idp/idp: capabilities not drop ALL',
      'Job/platform-migrate/migrate: root filesystem writable',
    ]);
  });

  it('every secret by reference: mounted Secret files read through <NAME>_FILE, no value in the manifests', () => {
    expect(secretProblems(objs)).toEqual([]);
    const broken = structuredClone(objs);
    podSpec(named(broken, 'Deployment', 'gateway')).containers[0].env.push({
      name: 'GATEWAY_IDENTITY_SECRET',
      value: 'an-inline-secret-value-0123456789abcdef',
    });
    byKind(broken, 'ConfigMap')[0].data.REDIS_URL = 'redis://u:p@redis:6379';
    podSpec(named(broken, 'Deployment', 'idp')).containers[0].env.push({
      name: 'REDIS_URL_FILE',
      value: '/etc/elsewhere/redis-url',
    });
    expect(secretProblems(broken)).toHaveLength(3);
  });

  it('each component gets only its own Secret; the signing key and the gateway secret stay where they belong', () => {
    const idp = secretsOf(objs, 'Deployment', 'idp');
    const gateway = secretsOf(objs, 'Deployment', 'gateway');
    expect(idp.secrets).toEqual(['platform-idp']);
    expect(gateway.secrets).toEqual(['platform-gateway']);
    expect(secretsOf(objs, 'Job', 'platform-migrate').secrets).toEqual(['platform-migrate']);
    expect(idp.variables).toContain('PLATFORM_OIDC_PRIVATE_KEY_FILE');
    expect(gateway.variables).toContain('GATEWAY_IDENTITY_SECRET_FILE');
    expect(gateway.variables).not.toContain('PLATFORM_OIDC_PRIVATE_KEY_FILE');
    for (const tool of ['platform', 'mail', 'deals']) {
      const t = secretsOf(objs, 'Deployment', `tool-${tool}`);
      expect(t.secrets).toEqual([`platform-tool-${tool}`]);
      expect(t.variables).toContain('TOOL_IDENTITY_KEY_FILE');
      expect(
        t.variables.filter((v: string) => /GATEWAY_IDENTITY_SECRET|OIDC_PRIVATE_KEY|REDIS_URL/.test(v)),
      ).toEqual([]);
    }
  });

  it('available through disruptions: 2+ replicas, a PodDisruptionBudget of 1, surge-first rollouts, spread, grace above the drain', () => {
    expect(availabilityProblems(objs)).toEqual([]);
    const broken = structuredClone(objs);
    podSpec(named(broken, 'Deployment', 'gateway')).terminationGracePeriodSeconds = 10;
    named(broken, 'PodDisruptionBudget', 'idp').spec.maxUnavailable = 2;
    podSpec(named(broken, 'Deployment', 'tool-deals')).topologySpreadConstraints = [];
    expect(availabilityProblems(broken)).toHaveLength(3);
  });

  it('NetworkPolicies: only the gateway reaches the tool servers, only the IdP and the gateway reach Redis', () => {
    expect(networkProblems(objs)).toEqual([]);
    // Without any policy selecting the tool servers, anyone reaches them; without Redis's
    // policy, the default deny shuts its clients out: the rules above must notice both.
    const drop = (...names: string[]) => objs.filter((o) => !names.includes(o.metadata.name));
    expect(
      networkProblems(
        drop(
          'platform-default-deny-ingress',
          'platform-tool-servers-from-gateway',
          'platform-metrics-from-prometheus',
        ),
      ),
    ).toContain('outside → tool-mail:3000 should be refused');
    expect(networkProblems(drop('platform-redis-from-idp-and-gateway'))).toEqual([
      'idp → redis:6379 should be allowed',
      'gateway → redis:6379 should be allowed',
    ]);
    // The metrics policy as it was (any namespace's pod labelled prometheus): noticed.
    const anyNamespace = structuredClone(objs);
    named(anyNamespace, 'NetworkPolicy', 'platform-metrics-from-prometheus').spec.ingress[0].from = [
      { namespaceSelector: {}, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } } },
    ];
    expect(networkProblems(anyNamespace)).toEqual([
      'prometheus (another namespace) → idp:9464 should be refused',
      'prometheus (another namespace) → gateway:9464 should be refused',
      'prometheus (another namespace) → tool-mail:9464 should be refused',
    ]);
  });

  it('the gateway names the tool servers and the IdP by their Service, on the port the Service serves', () => {
    const config = byKind(objs, 'ConfigMap').find((m) => m.metadata.name.startsWith('platform-gateway-'));
    const services = new Map(byKind(objs, 'Service').map((s) => [s.metadata.name, s]));
    for (const v of [
      'PLATFORM_MCP_UPSTREAM',
      'MAIL_MCP_UPSTREAM',
      'DEALS_MCP_UPSTREAM',
      'PLATFORM_JWKS_URL',
    ]) {
      const u = new URL(config.data[v]);
      expect(
        services.get(u.hostname)?.spec.ports.map((p: Obj) => p.port),
        v,
      ).toContain(Number(u.port));
    }
    // The generated ConfigMap is the one each Deployment reads (its hashed name rolls the pods on a change).
    const gw = podSpec(named(objs, 'Deployment', 'gateway')).containers[0];
    expect(gw.envFrom[0].configMapRef.name).toBe(config.metadata.name);
  });
});

// deploy/kubernetes/key-rotation: the component that switches signing-key rotation on. The IdP's environment
// (its ConfigMap and env) and its Secret's files, as the pod would see them, fed to the IdP's own config loader.
describe('deploy/kubernetes/key-rotation (a kustomize Component over the base)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'k8s-key-rotation-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  // The keys of the Secret platform-idp in a deployment of its own.
  const secret: Record<string, string> = {
    'oidc-private-key': generateKeyPairSync('rsa', { modulusLength: 2048 })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString(),
    'database-url': 'postgresql://platform_idp:own-password@postgres:5432/platform',
    'redis-url': 'redis://idp:own-password@redis:6379',
    'key-encryption-key': randomBytes(36).toString('base64url'),
  };

  /** The IdP container's view: ConfigMap values, then its env, and the Secret's items where they are mounted. */
  function idpConfig(objs: Obj[]) {
    const spec = podSpec(named(objs, 'Deployment', 'idp'));
    const c = spec.containers[0];
    const env: Record<string, string> = {};
    for (const from of c.envFrom ?? [])
      Object.assign(env, named(objs, 'ConfigMap', from.configMapRef.name).data);
    for (const e of c.env ?? []) env[e.name] = e.value;
    const mounted: Record<string, string> = {};
    for (const m of c.volumeMounts ?? []) {
      const v = spec.volumes.find((x: Obj) => x.name === m.name);
      if (v?.secret?.secretName !== 'platform-idp') continue;
      for (const item of v.secret.items) mounted[`${m.mountPath}/${item.path}`] = secret[item.key]!;
    }
    return loadIdpConfig(withMountedFiles(env, mounted, scratch));
  }

  it('the base leaves rotation off: the static key signs', () => {
    const config = idpConfig(render());
    expect(config.keyRotation).toBeUndefined();
    expect(config.privateKey).toBe(secret['oidc-private-key']!.trim());
  });

  it('switches rotation on, the encryption key a file of platform-idp, the static key still imported', async () => {
    const objs = renderWith(scratch, 'key-rotation');
    const config = idpConfig(objs);
    expect(config.keyRotation).toMatchObject({ encryptionKey: secret['key-encryption-key'] });
    expect(config.privateKey).toBe(secret['oidc-private-key']!.trim());
    // Still valid, still secrets by reference only.
    expect(await validationProblems(objs)).toEqual([]);
    expect(secretProblems(objs)).toEqual([]);
    const broken = structuredClone(objs);
    podSpec(named(broken, 'Deployment', 'idp')).volumes[0].secret.items = podSpec(
      named(broken, 'Deployment', 'idp'),
    ).volumes[0].secret.items.filter((i: Obj) => i.key !== 'key-encryption-key');
    expect(secretProblems(broken)).toEqual([
      'Deployment/idp/idp: PLATFORM_KEY_ENCRYPTION_KEY_FILE names key-encryption-key, not an item of Secret platform-idp',
    ]);
  });

  it('changes nothing but the IdP Deployment', () => {
    const base = render();
    const objs = renderWith(scratch, 'key-rotation');
    const others = (list: Obj[]) =>
      list.filter((o) => !(o.kind === 'Deployment' && o.metadata.name === 'idp'));
    expect(others(objs)).toEqual(others(base));
    // And in it, two variables and one Secret item.
    const idp = (list: Obj[]) => podSpec(named(list, 'Deployment', 'idp'));
    const names = (list: Obj[]) => idp(list).containers[0].env.map((e: Obj) => e.name);
    expect(names(objs).filter((n: string) => !names(base).includes(n))).toEqual([
      'PLATFORM_KEY_ROTATION',
      'PLATFORM_KEY_ENCRYPTION_KEY_FILE',
    ]);
    expect(idp(objs).volumes[0].secret.items.length).toBe(idp(base).volumes[0].secret.items.length + 1);
  });
});
