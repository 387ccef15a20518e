// `platform doctor --compose`'s tunnel rows (#1 for the tunnel container, #10 for its ingress) on a compose file
// whose tunnel is in a profile: with the profile off (no tunnel container) they SKIP and say why; with it on
// the rendered ingress is checked, and a missing config file or path rule FAILs.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { renderTunnelConfig } from '../../deploy/cloudflared/tunnel-config.ts';
import type { ComposeService, ComposeTarget, Container } from '../../deploy/doctor/compose.ts';
import { runContainerChecks } from '../../deploy/doctor/run-containers.ts';

const dir = mkdtempSync(join(tmpdir(), 'doctor-tunnel-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const BASE_URL = 'https://app.example.com';
const tunnel: ComposeService = {
  name: 'tunnel',
  profiles: ['tunnel'],
  // compose.yaml's mount, a compose variable in it (not a template string).
  // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolates it, not JavaScript
  volumes: ['${CLOUDFLARED_CONFIG:-./cloudflared/config.yml}:/etc/cloudflared/config.yml:ro'],
};

/** A compose deployment of one service, the tunnel, running or not (what `docker ps` would list). */
function target(o: { tunnelRunning: boolean; config?: string }): ComposeTarget {
  const running: Container = {
    id: 'c0ffee000001',
    name: 'p-tunnel-1',
    service: 'tunnel',
    running: true,
    health: 'healthy',
    env: new Map(),
    image: 'cloudflare/cloudflared',
  };
  return {
    file: join(dir, 'compose.yaml'),
    dir,
    project: 'p',
    services: new Map([['tunnel', tunnel]]),
    vars: { CLOUDFLARED_CONFIG: o.config ?? join(dir, 'missing.yml') },
    containers: async (service) => (service === 'tunnel' && o.tunnelRunning ? [running] : []),
    logs: async () => '',
    exec: async () => ({ code: 0, out: '' }),
  };
}

const rows = (t: ComposeTarget, services = ['platform', 'deals']) =>
  runContainerChecks(t, { baseUrl: BASE_URL, services, authenticatedCallMade: false });
const tunnelRows = (r: Awaited<ReturnType<typeof rows>>) =>
  r.filter((x) => x.ref === '#10' || x.subject === 'tunnel').map((x) => `${x.verdict} ${x.ref} ${x.subject}`);

describe('platform doctor: the tunnel rows', () => {
  it('SKIP #1 and every #10 with the reason when the tunnel profile is off, even with no config file', async () => {
    const r = await rows(target({ tunnelRunning: false }));
    expect(tunnelRows(r)).toEqual(['SKIP #1 tunnel', 'SKIP #10 platform', 'SKIP #10 deals']);
    for (const x of r.filter((x) => x.ref === '#10'))
      expect(x.detail).toBe('tunnel: profile tunnel not running (COMPOSE_PROFILES)');
  });

  it('checks the ingress when the tunnel runs: PASS for a rendered config, FAIL without one', async () => {
    const config = join(dir, 'config.yml');
    writeFileSync(
      config,
      renderTunnelConfig({
        host: 'app.example.com',
        tunnelId: '00000000-0000-4000-8000-000000000000',
        services: ['platform'],
        proxyUrl: 'http://proxy:81',
      }),
    );
    const r = await rows(target({ tunnelRunning: true, config }));
    expect(tunnelRows(r)).toEqual(['PASS #1 tunnel', 'PASS #10 platform', 'FAIL #10 deals']);
    expect(r.find((x) => x.ref === '#10' && x.subject === 'deals')?.detail).toContain(
      '/deals/mcp is not routed for app.example.com',
    );
    const missing = await rows(target({ tunnelRunning: true }), ['platform']);
    expect(tunnelRows(missing)).toEqual(['PASS #1 tunnel', 'FAIL #10 platform']);
    expect(missing.find((x) => x.ref === '#10')?.detail).toContain('cannot read the tunnel config');
  });
});
