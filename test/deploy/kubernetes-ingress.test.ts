// deploy/kubernetes/ingress: the base with its Ingress Component, rendered by `kubectl kustomize` from an overlay
// as an operator writes one, validated offline against the Kubernetes schemas (kubernetes-models), and its
// routing (Exact paths first, then the longest Prefix by path element, as the Ingress API defines it) compared
// with the compose proxy's (deploy/Caddyfile's `@idp` matcher) for every route the IdP and gateway serve.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { DEPLOY_DIR, REPO_DIR } from './support.ts';

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are plain JSON, read field by field below.
type Obj = any;

const scratch = mkdtempSync(join(tmpdir(), 'k8s-ingress-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function render(): Obj[] {
  const overlay = mkdtempSync(join(scratch, 'overlay-'));
  const base = relative(overlay, `${REPO_DIR}deploy/kubernetes`);
  writeFileSync(
    join(overlay, 'kustomization.yaml'),
    `resources:\n  - ${base}\ncomponents:\n  - ${base}/ingress\n`,
  );
  const out = execFileSync('kubectl', ['kustomize', overlay], { encoding: 'utf8' });
  return parseAllDocuments(out).map((d) => d.toJSON());
}

/** The Service an Ingress sends a path to: an Exact match, else the longest Prefix match by path element. */
function ingressBackend(ingress: Obj, path: string): string | undefined {
  const paths: Obj[] = ingress.spec.rules[0].http.paths;
  const exact = paths.find((p) => p.pathType === 'Exact' && p.path === path);
  if (exact) return exact.backend.service.name;
  const elements = (p: string) => p.split('/').filter(Boolean);
  const matches = paths.filter((p) => {
    if (p.pathType !== 'Prefix') return false;
    const want = elements(p.path);
    const got = elements(path);
    return want.every((e, i) => got[i] === e);
  });
  matches.sort((a, b) => elements(b.path).length - elements(a.path).length);
  return matches[0]?.backend.service.name;
}

/** deploy/Caddyfile's split: a path its `@idp` matcher names goes to the IdP, everything else to the gateway. */
function caddyBackend(path: string): string {
  const line = readFileSync(join(DEPLOY_DIR, 'Caddyfile'), 'utf8')
    .split('\n')
    .find((l) => l.trim().startsWith('@idp path '))!;
  const patterns = line.trim().split(/\s+/).slice(2);
  const hit = patterns.some((p) => (p.endsWith('*') ? path.startsWith(p.slice(0, -1)) : path === p));
  return hit ? 'idp' : 'gateway';
}

const ROUTES = [
  '/.well-known/openid-configuration',
  '/.well-known/oauth-authorization-server',
  '/.well-known/jwks.json',
  '/.well-known/oauth-protected-resource/platform/mcp',
  '/oauth/authorize',
  '/oauth/token',
  '/oauth/register',
  '/oauth/device',
  '/admin',
  '/admin/api/revoke-user',
  '/admin/users',
  '/platform/mcp',
  '/mail/.well-known/oauth-protected-resource',
  '/deals/health',
  '/health',
  '/oauthx',
  '/administrator',
];

describe('deploy/kubernetes/ingress (a kustomize Component over the base)', () => {
  const objs = render();
  const ingress = objs.find((o) => o.kind === 'Ingress');

  it('renders one valid Ingress whose backends are Services of the base, on their http port', async () => {
    expect(objs.filter((o) => o.kind === 'Ingress')).toHaveLength(1);
    const { Ingress } = await import('kubernetes-models/networking.k8s.io/v1/Ingress');
    expect(() => new Ingress(ingress).validate()).not.toThrow();
    const services = new Map(objs.filter((o) => o.kind === 'Service').map((s) => [s.metadata.name, s]));
    for (const p of ingress.spec.rules[0].http.paths) {
      const svc = services.get(p.backend.service.name);
      expect(svc, p.backend.service.name).toBeDefined();
      expect(svc.spec.ports.map((x: Obj) => x.name)).toContain(p.backend.service.port.name);
    }
  });

  it('splits every route between the IdP and the gateway as the compose proxy does', () => {
    const split = Object.fromEntries(ROUTES.map((r) => [r, ingressBackend(ingress, r)]));
    expect(split).toEqual(Object.fromEntries(ROUTES.map((r) => [r, caddyBackend(r)])));
    expect(split['/oauth/token']).toBe('idp');
    expect(split['/platform/mcp']).toBe('gateway');
  });

  it('a rule that stopped splitting would be caught', () => {
    const broken = structuredClone(ingress);
    broken.spec.rules[0].http.paths = broken.spec.rules[0].http.paths.filter((p: Obj) => p.path !== '/admin');
    expect(ingressBackend(broken, '/admin/api/revoke-user')).not.toBe(caddyBackend('/admin/api/revoke-user'));
  });

  it('leaves the base without an Ingress, and sets PLATFORM_SERVICES and PLATFORM_ADMIN_EMAILS for the IdP', () => {
    const out = execFileSync('kubectl', ['kustomize', `${REPO_DIR}deploy/kubernetes`], { encoding: 'utf8' });
    const base: Obj[] = parseAllDocuments(out).map((d) => d.toJSON());
    expect(base.some((o) => o.kind === 'Ingress')).toBe(false);
    const idp = base.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('platform-idp'));
    expect(idp.data.PLATFORM_SERVICES).toBe('platform,mail,deals');
    expect(idp.data).toHaveProperty('PLATFORM_ADMIN_EMAILS');
  });
});
