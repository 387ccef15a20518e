// The variables docs/reference.md documents for each server process, read from the reference itself, and how the
// deployment (deploy/compose.yaml, deploy/stack.yaml, deploy/kubernetes/) hands each one to its container. One
// reading, shared by test/deploy/documented-variables.test.ts (every documented variable reaches its process in
// every rendering) and `platform doctor --compose` (a variable deploy/.env sets that a running container lacks).
//
// The rule is uniform (docs/deploy.md § Every documented variable): a variable the operator sets is passed
// through under its own name — compose and the Swarm stack list `NAME: ${NAME:-}` in the container's
// environment, Kubernetes reads the component's ConfigMap whole (`envFrom`) — unless this file says otherwise:
// the deployment sets it itself (ports, addresses, the Redis and database URLs), reads it under another `.env`
// name, or hands it over as a secret file.
import { readFileSync } from 'node:fs';

export type Process = 'idp' | 'gateway' | 'tool';

export interface DocumentedVariable {
  /** As the reference writes it; `<SERVICE>_…` is a family, one variable per service. */
  readonly name: string;
  readonly process: Process;
}

/** The services the deployment files deploy (their gateway's GATEWAY_SERVICES). */
export const DEPLOYED_SERVICES = ['platform', 'mail', 'deals'] as const;

// Headings of docs/reference.md § Variables whose tables list a server process's variables. A section whose
// heading says "every server" lists variables all three read (e.g. the OpenTelemetry set).
const SECTIONS: ReadonlyArray<[RegExp, readonly Process[]]> = [
  [/^### IdP \(`platform idp`\)/, ['idp']],
  [/^### Gateway \(`platform gateway`\)/, ['gateway']],
  [/^### Tool servers \(`platform tool/, ['tool']],
  [/^### .*every server/i, ['idp', 'gateway', 'tool']],
];

const NAME = /^(?:<SERVICE>_|…_)?[A-Z][A-Z0-9_]*$/;

/** The names in a table row's first cell: `A`, `B`; `…_X` repeats the first name's prefix (`PLATFORM_AUTHJS_…`). */
function namesIn(cell: string): string[] {
  const out: string[] = [];
  for (const m of cell.matchAll(/`([^`]+)`/g)) {
    const token = m[1]!;
    if (!NAME.test(token)) {
      // A family written some other way (`OTEL_*`, `<NAME>_X`) would otherwise be skipped unchecked.
      if (/^[A-Z<…][A-Za-z0-9_<>…*]*$/.test(token) && /[*<]/.test(token))
        throw new Error(
          `docs/reference.md: \`${token}\` is a family of variables the deployment check cannot expand: list its variables by name, or write it <SERVICE>_… (one per service)`,
        );
      continue;
    }
    if (token.startsWith('…_')) {
      const first = out[0];
      if (first === undefined) continue;
      const tail = token.slice(2).split('_');
      const head = first.split('_').slice(0, -tail.length);
      out.push([...head, ...tail].join('_'));
    } else out.push(token);
  }
  return out;
}

/** Every variable the reference's per-process tables list, in the reference's order. */
export function documentedVariables(referenceText: string): DocumentedVariable[] {
  const out: DocumentedVariable[] = [];
  let processes: readonly Process[] = [];
  for (const line of referenceText.split('\n')) {
    if (line.startsWith('#')) {
      processes = SECTIONS.find(([re]) => re.test(line))?.[1] ?? [];
      continue;
    }
    if (processes.length === 0 || !line.startsWith('|') || /^\|\s*-/.test(line)) continue;
    const first = line.split('|')[1] ?? '';
    if (/^\s*variable\b/.test(first)) continue;
    for (const name of namesIn(first))
      for (const process of processes)
        if (!out.some((v) => v.name === name && v.process === process)) out.push({ name, process });
  }
  return out;
}

/** The variables of the reference's § Secrets from files (each may be given as `<NAME>_FILE`). */
export function secretVariables(referenceText: string): string[] {
  const section = referenceText.split(/^### /m).find((s) => s.startsWith('Secrets from files')) ?? '';
  return section
    .split('\n')
    .filter((l) => l.startsWith('|') && !/^\|\s*-/.test(l))
    .flatMap((l) => namesIn(l.split('|')[1] ?? ''))
    .filter((n) => n !== 'PLATFORM_TOKEN');
}

/** docs/reference.md of the checkout (absent from the image, which holds no docs). */
export const REFERENCE_URL = new URL('../../docs/reference.md', import.meta.url);

export function readReference(path: URL = REFERENCE_URL): string {
  return readFileSync(path, 'utf8');
}

/**
 * How the deployment provides a variable when it does not pass the operator's value through under the same
 * name. Keyed `<target>:<name>` (target `compose`, `swarm`, `kubernetes`), `<process>:<name>` or `<name>`, the
 * first found wins. `set`: the deployment sets it itself (the renderings must show it set); `from`: deploy/.env (and the
 * Swarm shell) name it differently, one value for every service of a family; `other`: a form the deployment
 * files do not use, with where the docs say how.
 */
export type Provision =
  | { readonly kind: 'set'; readonly why: string }
  | { readonly kind: 'from'; readonly env: string; readonly why: string }
  | { readonly kind: 'other'; readonly why: string };

const REDIS_FORMS =
  'the deployment names its one Redis with REDIS_URL; Sentinel and Cluster: docs/deploy.md § Redis high availability';

export const PROVISIONS: Readonly<Record<string, Provision>> = {
  IDP_PORT: { kind: 'set', why: 'every server container listens on 3000' },
  GATEWAY_PORT: { kind: 'set', why: 'every server container listens on 3000' },
  '<SERVICE>_MCP_PORT': { kind: 'set', why: 'every server container listens on 3000' },
  DATABASE_URL: { kind: 'set', why: "the component's own role (compose: DATABASE_ADDRESS and its password)" },
  REDIS_URL: { kind: 'set', why: "the component's own Redis user" },
  PLATFORM_TRUSTED_PROXIES: {
    kind: 'from',
    env: 'FRONT_SUBNET',
    why: 'the proxy reaches the IdP from there',
  },
  GATEWAY_SERVICES: { kind: 'set', why: 'the tool servers the files deploy' },
  '<SERVICE>_MCP_UPSTREAM': { kind: 'set', why: "the tool server's network alias" },
  PLATFORM_ISSUER: {
    kind: 'from',
    env: 'PLATFORM_OIDC_ISSUER',
    why: 'the gateway trusts the IdP it deploys',
  },
  PLATFORM_JWKS_URL: { kind: 'set', why: 'fetched inside the network' },
  TOOL_IDENTITY_KEY: {
    kind: 'set',
    why: '<SERVICE>_TOOL_IDENTITY_KEY in deploy/.env, a secret file elsewhere',
  },
  GATEWAY_IDENTITY_SECRET: { kind: 'set', why: 'required; a secret file in Swarm and Kubernetes' },
  '<SERVICE>_MCP_ALLOWED_HOSTS': {
    kind: 'from',
    env: 'MCP_ALLOWED_HOSTS',
    why: 'one list for every service',
  },
  '<SERVICE>_MCP_ALLOWED_ORIGINS': {
    kind: 'from',
    env: 'MCP_ALLOWED_ORIGINS',
    why: 'one list for every service',
  },
  'tool:<SERVICE>_MCP_ALLOWED_HOSTS': {
    kind: 'from',
    env: 'TOOL_MCP_ALLOWED_HOSTS',
    why: 'the tool servers’ own list',
  },
  'tool:<SERVICE>_MCP_ALLOWED_ORIGINS': {
    kind: 'from',
    env: 'TOOL_MCP_ALLOWED_ORIGINS',
    why: 'the tool servers’ own list',
  },
  'swarm:PLATFORM_KEY_ROTATION': { kind: 'set', why: 'deploy/stack.key-rotation.yaml sets auto' },
  'kubernetes:PLATFORM_KEY_ROTATION': {
    kind: 'set',
    why: 'the Component deploy/kubernetes/key-rotation sets auto',
  },
  // A Swarm secret must exist to be declared, so an optional one is an override file of the operator's, written
  // as deploy/stack.key-rotation.yaml is.
  'swarm:<SERVICE>_MCP_SHARED_SECRET': { kind: 'other', why: 'docs/deploy.md § Optional secrets in Swarm' },
  'swarm:GRAPH_CLIENT_SECRET': { kind: 'other', why: 'docs/deploy.md § Optional secrets in Swarm' },
  'swarm:PLATFORM_AUTHJS_SECRET': { kind: 'other', why: 'docs/deploy.md § Optional secrets in Swarm' },
  'swarm:PLATFORM_CONNECTIONS_KEY': { kind: 'other', why: 'docs/deploy.md § Optional secrets in Swarm' },
  'swarm:PLATFORM_GATEWAY_CLIENT_SECRET': {
    kind: 'other',
    why: 'docs/deploy.md § Optional secrets in Swarm',
  },
  'swarm:GATEWAY_CLIENT_SECRET': { kind: 'other', why: 'docs/deploy.md § Optional secrets in Swarm' },
  // The IdP's Secret is mounted item by item (the key-rotation Component adds to that list), and an item whose
  // key is missing stops the pod, so its optional secrets are an item the operator's overlay adds.
  'kubernetes:PLATFORM_AUTHJS_SECRET': {
    kind: 'other',
    why: 'docs/deploy.md § Optional secrets of the IdP in Kubernetes',
  },
  'kubernetes:PLATFORM_CONNECTIONS_KEY': {
    kind: 'other',
    why: 'docs/deploy.md § Optional secrets of the IdP in Kubernetes',
  },
  'kubernetes:PLATFORM_GATEWAY_CLIENT_SECRET': {
    kind: 'other',
    why: 'docs/deploy.md § Optional secrets of the IdP in Kubernetes',
  },
  REDIS_SENTINELS: { kind: 'other', why: REDIS_FORMS },
  REDIS_SENTINEL_MASTER: { kind: 'other', why: REDIS_FORMS },
  REDIS_CLUSTER_NODES: { kind: 'other', why: REDIS_FORMS },
  REDIS_USERNAME: { kind: 'other', why: REDIS_FORMS },
  REDIS_PASSWORD: { kind: 'other', why: REDIS_FORMS },
  REDIS_SENTINEL_USERNAME: { kind: 'other', why: REDIS_FORMS },
  REDIS_SENTINEL_PASSWORD: { kind: 'other', why: REDIS_FORMS },
};

/** Tool-server variables only one tool server reads (the others never get them: GRAPH_CLIENT_SECRET is a secret). */
export const TOOL_ONLY: Readonly<Record<string, (typeof DEPLOYED_SERVICES)[number]>> = {
  GRAPH_TENANT_ID: 'mail',
  GRAPH_CLIENT_ID: 'mail',
  GRAPH_CLIENT_SECRET: 'mail',
  GRAPH_BASE_URL: 'mail',
  GRAPH_TOKEN_URL: 'mail',
  MAIL_UPSTREAM_CONNECTION: 'mail',
  DEALS_ENTITY_SQL: 'deals',
  PLATFORM_ENTITY_ENFORCEMENT: 'deals',
};

/** The containers (compose/Swarm service names) that run a process. */
export function containersOf(process: Process): string[] {
  return process === 'tool' ? DEPLOYED_SERVICES.map((s) => `tool-${s}`) : [process];
}

/**
 * The concrete variables a container reads for a documented one: a `<SERVICE>_` family is one per deployed
 * service at the gateway, the tool server's own at a tool server; none when it is not that container's.
 */
export function concreteNames(v: DocumentedVariable, container: string): string[] {
  const tool = container.startsWith('tool-') ? container.slice(5) : undefined;
  const only = TOOL_ONLY[v.name];
  if (only !== undefined && tool !== only) return [];
  if (!v.name.startsWith('<SERVICE>_')) return [v.name];
  const rest = v.name.slice('<SERVICE>'.length);
  const services = tool !== undefined ? [tool] : DEPLOYED_SERVICES;
  return services.map((s) => `${s.toUpperCase()}${rest}`);
}

/**
 * Documented, pass-through variables whose value is a path: the folder the container mounts for them, and the
 * deployment folder (compose, Swarm) it comes from. docs/deploy.md § Files the containers read.
 */
export const FILE_MOUNTS: Readonly<Record<string, { readonly path: string; readonly source: string }>> = {
  PLATFORM_CIMD_PINNED_DIR: { path: '/etc/platform/cimd-pinned', source: './cimd-pinned' },
  PLATFORM_TRUSTED_ISSUERS_FILE: { path: '/etc/platform/idp', source: './idp' },
  PLATFORM_CIMD_CA_FILE: { path: '/etc/platform/idp', source: './idp' },
  PLATFORM_CONNECTIONS_FILE: { path: '/etc/platform/idp', source: './idp' },
  GATEWAY_POLICY_FILE: { path: '/etc/platform/policy', source: './policy' },
};

/** Whether a documented variable's value names a file or folder the process reads. */
export function isFileValued(name: string): boolean {
  return /_(FILE|DIR)$/.test(name);
}
