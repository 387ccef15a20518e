// The deployment files cannot run here (no Docker engine, no tunnel, no Azure), so what the spec fixes in them
// is checked by reading them: the image's health check (and its command, run for real), the proxy's retry
// settings and flat routing, the tunnel's path rules, and compose's wiring, fed through the components' own
// config loaders with env.example's values.
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderTunnelConfig } from '../../deploy/cloudflared/tunnel-config.ts';
import { loadGatewayConfig } from '../../gateway/config.ts';
import { loadIdpConfig } from '../../idp/config.ts';
import { ConfigError, databaseUrl } from '../../lib/config.ts';
import { isExampleSecret } from '../../lib/example-secrets.ts';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { loadToolConfig } from '../../tools/config.ts';
import { freePort } from '../helpers/processes.ts';
import { DEPLOY_DIR, deployFile, envFile, interpolate, REPO_DIR } from './support.ts';

const SERVICES = ['platform', 'mail', 'deals'];

/** Dockerfile instructions with their continuation lines joined. */
function instructions(dockerfile: string): string[] {
  return dockerfile
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

describe('deploy/Dockerfile', () => {
  const lines = instructions(deployFile('Dockerfile'));
  const healthcheck = lines.filter((l) => l.startsWith('HEALTHCHECK'));

  it('has the spec health check: GET 127.0.0.1:3000/health, 30 s / 5 s / 3 retries / 10 s start', () => {
    expect(healthcheck).toHaveLength(1);
    const [options, cmd] = healthcheck[0]!.split(/\s+CMD\s+/);
    expect(options!.split(/\s+/).slice(1).sort()).toEqual(
      ['--interval=30s', '--retries=3', '--start-period=10s', '--timeout=5s'].sort(),
    );
    expect(cmd).toContain("'http://127.0.0.1:3000/health'");
  });

  describe('its health-check command, run against a local server', () => {
    const servers: Server[] = [];
    afterAll(() => {
      for (const s of servers) s.close();
    });
    const exec = (JSON.parse(healthcheck[0]!.split(/\s+CMD\s+/)[1]!) as string[]).slice(1);
    async function exitCode(status: number | 'closed' | 'hang'): Promise<number | null> {
      const port = await freePort();
      if (status !== 'closed') {
        const s = createServer((_req, res) => {
          if (status !== 'hang') res.writeHead(status).end();
        });
        servers.push(s);
        await new Promise<void>((r) => s.listen(port, '127.0.0.1', r));
      }
      // The same node -e program, pointed at this test's port instead of 3000.
      const args = exec.map((a) => a.replace('127.0.0.1:3000', `127.0.0.1:${port}`));
      // Asynchronously: a synchronous spawn would block this process, and with it the server being asked.
      return new Promise((resolve) => {
        execFile(process.execPath, args, { timeout: 10_000 }, (err) =>
          resolve(err ? ((err as { code?: number }).code ?? null) : 0),
        );
      });
    }
    it('exits 0 on 200, 1 on 503, a refused connection or no answer within its own 4 s', async () => {
      expect(exec[0]).toBe('-e');
      expect(await exitCode(200)).toBe(0);
      expect(await exitCode(503)).toBe(1);
      expect(await exitCode('closed')).toBe(1);
      expect(await exitCode('hang')).toBe(1);
    }, 20_000);
  });

  it('installs production dependencies only, runs as a non-root user, enters through `platform`', () => {
    // The base is a build argument whose default is the official Node 24 slim image.
    expect(lines).toContain('ARG NODE_IMAGE=node:24-bookworm-slim');
    expect(
      lines.filter((l) => l.startsWith('FROM')).every((l) => /^FROM \$\{NODE_IMAGE\}( AS \w+)?$/.test(l)),
    ).toBe(true);
    expect(lines.some((l) => /^RUN npm ci --omit=dev/.test(l))).toBe(true);
    // Built by the legacy builder too (docker-compose 1.29): no BuildKit-only syntax.
    expect(lines.filter((l) => /^RUN\s+--|<</.test(l))).toEqual([]);
    const user = lines.filter((l) => l.startsWith('USER')).at(-1);
    expect(user).toMatch(/^USER (?!root|0\b)\w+/);
    expect(lines.filter((l) => l.startsWith('ENTRYPOINT'))).toEqual(['ENTRYPOINT ["platform"]']);
  });

  it('copies only paths that exist, each let through by the root .dockerignore (both builders read it)', () => {
    expect(existsSync(join(DEPLOY_DIR, 'Dockerfile.dockerignore'))).toBe(false);
    const allowed = readFileSync(join(REPO_DIR, '.dockerignore'), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('!'))
      .map((l) => l.slice(1).replace(/\/$/, ''));
    const sources = lines
      .filter((l) => l.startsWith('COPY') && !l.includes('--from='))
      .flatMap((l) => l.split(/\s+/).slice(1, -1));
    expect(sources.length).toBeGreaterThan(5);
    for (const src of sources) {
      expect(existsSync(join(REPO_DIR, src)), src).toBe(true);
      expect(allowed, src).toContain(src.replace(/\/$/, ''));
    }
  });
});

describe('deploy/Caddyfile', () => {
  const caddyfile = deployFile('Caddyfile');
  const code = caddyfile
    .split('\n')
    .map((l) => l.replace(/#.*/, '').trim())
    .filter(Boolean)
    .join('\n');

  it('retries each backend for 5 s every 250 ms, allows gzip, and strips no prefix', () => {
    // Each reverse_proxy line opens a block that ends at the next line holding only `}`.
    const lines = code.split('\n');
    const proxies = lines.flatMap((l, i) =>
      l.startsWith('reverse_proxy') && l.endsWith('{')
        ? [lines.slice(i, lines.indexOf('}', i) + 1).join('\n')]
        : [],
    );
    expect(proxies).toHaveLength(3);
    for (const p of proxies) {
      expect(p).toContain('lb_try_duration 5s');
      expect(p).toContain('lb_try_interval 250ms');
    }
    expect(code).toMatch(/^encode gzip$/m);
    // Nested path handlers and prefix stripping are what the spec forbids.
    expect(code).not.toMatch(/\b(handle_path|handle|route|uri|rewrite|strip_prefix)\b/);
    expect(code).toContain('{$GATEWAY_UPSTREAM:gateway:3000}');
    expect(code).toContain('{$IDP_UPSTREAM:idp:3000}');
    // The web application's sign-in path: the gateway unless a trial names its sign-in page.
    expect(code).toContain('reverse_proxy @signin {$SIGNIN_UPSTREAM:gateway:3000}');
  });

  it('adapts to flat routes with those settings (caddy adapt)', () => {
    if (spawnSync('caddy', ['version']).status !== 0) {
      throw new Error(`No caddy binary: install Debian's "caddy" package`);
    }
    const r = spawnSync('caddy', [
      'adapt',
      '--config',
      join(DEPLOY_DIR, 'Caddyfile'),
      '--adapter',
      'caddyfile',
    ]);
    expect(r.status, r.stderr.toString()).toBe(0);
    const json = JSON.parse(r.stdout.toString()) as {
      apps: {
        http: {
          servers: Record<
            string,
            { listen: string[]; routes: Array<{ handle: Array<Record<string, unknown>> }> }
          >;
        };
      };
    };
    const servers = Object.values(json.apps.http.servers);
    // The open port and the tunnel's: the same flat routes, each naming the client its own way.
    expect(servers.map((x) => x.listen)).toEqual([[':80'], [':81']]);
    const clientAddress: string[] = [];
    for (const server of servers) {
      const handlers = server.routes.flatMap((r) => r.handle);
      expect(handlers.map((h) => h.handler)).toEqual([
        'vars',
        'encode',
        'reverse_proxy',
        'reverse_proxy',
        'reverse_proxy',
      ]);
      clientAddress.push(String(handlers[0]!.client_address));
      for (const h of handlers.filter((x) => x.handler === 'reverse_proxy')) {
        expect(h.load_balancing).toEqual({ try_duration: 5_000_000_000, try_interval: 250_000_000 });
        // Exactly one X-Forwarded-For leaves the proxy: the client address, whatever the client sent.
        expect(h.headers).toEqual({
          request: { set: { 'X-Forwarded-For': ['{http.vars.client_address}'] } },
        });
      }
    }
    expect(clientAddress).toEqual(['{http.request.remote.host}', '{http.request.header.Cf-Connecting-IP}']);
  });
});

describe('deploy/cloudflared/config.yml', () => {
  const text = deployFile('cloudflared/config.yml');
  const config = parse(text) as {
    tunnel: string;
    'credentials-file': string;
    ingress: Array<Record<string, string>>;
  };
  const host = 'app.example.com';

  it('is what render-config.ts renders for the example host', () => {
    expect(text).toBe(
      renderTunnelConfig({
        host,
        tunnelId: config.tunnel,
        services: SERVICES,
        proxyUrl: 'http://proxy:81',
      }),
    );
  });

  it('lists the host and, per service, the two path rules of check #10, ending in a 404 catch-all', () => {
    const rules = config.ingress;
    const routed = (path: string) =>
      rules.find((r) => r.hostname !== undefined && new RegExp(r.path ?? '').test(path));
    for (const s of SERVICES) {
      for (const path of [`/${s}/mcp`, `/${s}/.well-known/oauth-protected-resource`, `/${s}/health`]) {
        expect(routed(path), path).toMatchObject({ hostname: host, service: 'http://proxy:81' });
      }
      expect(rules.filter((r) => r.path === `^/${s}/mcp$`)).toHaveLength(1);
      expect(rules.filter((r) => r.path === `^/${s}/\\.well-known/oauth-protected-resource$`)).toHaveLength(
        1,
      );
      // Anchored: near misses do not open anything.
      for (const path of [
        `/${s}/mcp/x`,
        `/${s}x/mcp`,
        `/x/${s}/mcp`,
        `/${s}/.well-known/oauth-protected-resourcex`,
      ]) {
        expect(routed(path), path).toBeUndefined();
      }
    }
    expect(routed('/.well-known/openid-configuration')).toBeDefined();
    expect(routed('/oauth/token')).toBeDefined();
    for (const path of [
      '/oauth/device',
      '/admin',
      '/admin/audit',
      '/admin/users/a%40b.c',
      '/admin/api/audit',
    ])
      expect(routed(path), path).toMatchObject({ hostname: host, service: 'http://proxy:81' });
    for (const path of ['/administrator', '/oauth/devices', '/x/admin'])
      expect(routed(path), path).toBeUndefined();
    expect(rules.at(-1)).toEqual({ service: 'http_status:404' });
    expect(rules.slice(0, -1).every((r) => r.hostname === host)).toBe(true);
    expect(config['credentials-file']).toBe('/etc/cloudflared/credentials.json');
  });
});

describe('deploy/compose.yaml', () => {
  type Service = {
    image?: string;
    command?: string[];
    environment?: Record<string, string>;
    healthcheck?: Record<string, unknown>;
    depends_on?: Record<string, { condition: string; required?: boolean }>;
    networks?: Record<string, { aliases?: string[] } | null> | string[];
    restart?: string;
    volumes?: string[];
    profiles?: string[];
  };
  // compose.yaml with compose.postgres.yaml over it, merged as compose merges them (env.example's COMPOSE_FILE).
  const compose = parse(deployFile('compose.yaml'), { merge: true }) as { services: Record<string, Service> };
  const bundled = parse(deployFile('compose.postgres.yaml'), { merge: true }) as {
    services: Record<string, Service>;
  };
  const services = { ...compose.services };
  for (const [name, s] of Object.entries(bundled.services)) {
    const base = services[name];
    services[name] = base ? { ...base, depends_on: { ...base.depends_on, ...s.depends_on } } : s;
  }
  const example = envFile(deployFile('env.example'));
  const used = new Set<string>();
  /** A service's environment as compose interpolates it from `vars` (deploy/.env; env.example's by default). */
  const envOf = (name: string, vars: Record<string, string> = example): Record<string, string> =>
    Object.fromEntries(
      Object.entries(services[name]!.environment ?? {}).map(([k, v]) => [
        k,
        interpolate(String(v), vars, used),
      ]),
    );
  // env.example's secrets are published, so every server refuses them (test/security/example-secrets.test.ts):
  // the loaders are fed a deployment's own in their place.
  const ownSecret = (value: string): string => {
    if (/^[a-z]+(\+[a-z]+)?:\/\//.test(value)) {
      const u = new URL(value);
      if (u.password && isExampleSecret(decodeURIComponent(u.password))) u.password = 'own-password';
      return u.toString();
    }
    if (!isExampleSecret(value)) return value;
    return /^[0-9a-f]{64}$/.test(value)
      ? randomBytes(32).toString('hex')
      : randomBytes(36).toString('base64url');
  };
  const ownEnvOf = (name: string, vars: Record<string, string> = example): Record<string, string> =>
    Object.fromEntries(Object.entries(envOf(name, vars)).map(([k, v]) => [k, ownSecret(v)]));

  it('has the whole stack', () => {
    expect(Object.keys(services).sort()).toEqual(
      [
        'postgres',
        'redis',
        'migrate',
        'idp',
        'gateway',
        'tool-platform',
        'tool-mail',
        'tool-deals',
        'proxy',
        'signin',
        'prometheus',
        'tunnel',
      ].sort(),
    );
  });

  it("runs every server on port 3000 and checks its readiness there with the image check's limits", () => {
    const port: Record<string, string> = {
      idp: 'IDP_PORT',
      gateway: 'GATEWAY_PORT',
      'tool-platform': 'PLATFORM_MCP_PORT',
      'tool-mail': 'MAIL_MCP_PORT',
      'tool-deals': 'DEALS_MCP_PORT',
    };
    for (const [name, variable] of Object.entries(port)) {
      expect(services[name]!.environment?.[variable], name).toBe('3000');
      const check = services[name]!.healthcheck;
      expect((check?.test as string[] | undefined)?.join(' '), name).toContain(
        "'http://127.0.0.1:3000/health/ready'",
      );
      expect([check?.interval, check?.timeout, check?.retries, check?.start_period], name).toEqual([
        '30s',
        '5s',
        3,
        '10s',
      ]);
    }
    for (const name of ['postgres', 'redis', 'proxy', 'tunnel']) {
      expect(services[name]!.healthcheck?.test, name).toBeDefined();
    }
  });

  it('gives each tool server its network alias, which the gateway names as upstream on port 3000', () => {
    const gateway = services.gateway!.environment!;
    expect(gateway.GATEWAY_SERVICES).toBe(SERVICES.join(','));
    for (const s of SERVICES) {
      const tool = services[`tool-${s}`]!;
      expect(tool.command).toEqual(['tool', s]);
      expect((tool.networks as Record<string, { aliases: string[] }>).backend!.aliases).toContain(s);
      expect(gateway[`${s.toUpperCase()}_MCP_UPSTREAM`]).toBe(`http://${s}:3000`);
    }
    expect((services.proxy!.networks as Record<string, { aliases?: string[] }>).edge!.aliases).toContain(
      'proxy',
    );
    expect(Object.keys(services.tunnel!.networks as Record<string, unknown>)).toEqual(['edge']);
  });

  it('migrates once before the servers start, and keeps the signing key to the IdP', () => {
    const migrate = services.migrate!;
    expect(migrate.command).toEqual(['migrate']);
    expect(migrate.restart).toBe('no');
    expect(migrate.healthcheck).toEqual({ disable: true });
    for (const name of ['idp', 'tool-platform', 'tool-mail', 'tool-deals']) {
      expect(services[name]!.depends_on?.migrate?.condition, name).toBe('service_completed_successfully');
    }
    expect(migrate.depends_on?.postgres).toEqual({ condition: 'service_healthy' });
    expect(compose.services.postgres, 'Postgres is only in compose.postgres.yaml').toBeUndefined();
    expect(example.COMPOSE_FILE).toBe('compose.yaml:compose.postgres.yaml');
    for (const [name, s] of Object.entries(services)) {
      if (name !== 'idp')
        expect(Object.keys(s.environment ?? {}), name).not.toContain('PLATFORM_OIDC_PRIVATE_KEY');
    }
  });

  const networksOf = (name: string): string[] => {
    const n = services[name]!.networks ?? [];
    return (Array.isArray(n) ? n : Object.keys(n)).sort();
  };
  const on = (network: string) =>
    Object.keys(services)
      .filter((name) => networksOf(name).includes(network))
      .sort();

  it('puts Redis on a network of its own that only the IdP and the gateway join', () => {
    expect(networksOf('redis')).toEqual(['redis']);
    expect(on('redis')).toEqual(['gateway', 'idp', 'redis']);
    const networks = (
      parse(deployFile('compose.yaml')) as { networks: Record<string, { internal?: boolean }> }
    ).networks;
    expect(networks.redis?.internal).toBe(true);
    // Each with its own user and password, from deploy/.env.
    expect(envOf('idp').REDIS_URL).toBe(`redis://idp:${example.REDIS_IDP_PASSWORD}@redis:6379`);
    expect(envOf('gateway').REDIS_URL).toBe(`redis://gateway:${example.REDIS_GATEWAY_PASSWORD}@redis:6379`);
    const command = (services.redis!.command ?? []).join(' ');
    expect(command).toContain('--user default off resetpass resetkeys resetchannels -@all');
    // The health check authenticates (as admin, whose password only the Redis container has).
    expect(String(services.redis!.healthcheck?.test)).toContain('--user admin ping');
    expect(Object.keys(envOf('redis'))).toEqual(['REDISCLI_AUTH']);
  });

  it('lets the IdP believe X-Forwarded-For only from the front network, which the proxy reaches it by', () => {
    expect(on('front')).toEqual(['gateway', 'idp', 'proxy']);
    expect(networksOf('proxy')).toEqual(['edge', 'front']);
    // The trial's sign-in page (profile trial) is reached by the proxy over `edge`, never on `front`.
    expect(on('edge')).toEqual(['proxy', 'signin', 'tunnel']);
    const networks = (
      parse(deployFile('compose.yaml')) as {
        networks: Record<string, { ipam?: { config: Array<{ subnet: string }> } }>;
      }
    ).networks;
    const subnet = interpolate(networks.front!.ipam!.config[0]!.subnet, example);
    expect(loadIdpConfig(ownEnvOf('idp')).trustedProxies).toEqual([subnet]);
  });

  it('gives each component its own database role; only migrate gets the owner', () => {
    const role = (name: string) => new URL(envOf(name).DATABASE_URL!).username;
    expect(role('migrate')).toBe('platform_migrate');
    expect(role('idp')).toBe('platform_idp');
    for (const s of SERVICES) expect(role(`tool-${s}`)).toBe('platform_tools');
    for (const [name, s] of Object.entries(services)) {
      if (name !== 'postgres')
        expect(Object.keys(s.environment ?? {}), name).not.toContain('POSTGRES_PASSWORD');
    }
    const mounts = (services.postgres!.volumes ?? []).filter((v) => v.startsWith('./'));
    expect(mounts).toEqual([
      './postgres/roles.sh:/docker-entrypoint-initdb.d/10-platform-roles.sh:ro',
      './postgres/roles.sql:/etc/platform/postgres/roles.sql:ro',
    ]);
    for (const m of mounts) expect(existsSync(join(DEPLOY_DIR, m.split(':')[0]!)), m).toBe(true);
  });

  it('mounts the proxy and tunnel files that exist here', () => {
    const mounts = ['proxy', 'prometheus', 'tunnel']
      .flatMap((name) => services[name]!.volumes ?? [])
      .map((v) => interpolate(v, example, new Set()).split(':')[0]!)
      .filter((p) => p.startsWith('./'));
    expect(mounts).toEqual([
      './Caddyfile',
      './prometheus/prometheus.yml',
      './prometheus/alerts.yaml',
      './cloudflared/config.yml',
      './cloudflared/credentials.json',
    ]);
    for (const m of mounts.filter((p) => !p.endsWith('credentials.json')))
      expect(existsSync(join(DEPLOY_DIR, m)), m).toBe(true);
  });

  it("hands each component an environment its own config loader accepts (env.example's, own secrets)", () => {
    expect(() => databaseUrl(ownEnvOf('migrate'))).not.toThrow();
    const idp = loadIdpConfig(ownEnvOf('idp'));
    expect(idp.port).toBe(3000);
    expect(idp.issuer).toBe(example.PLATFORM_OIDC_ISSUER);
    const gateway = loadGatewayConfig(ownEnvOf('gateway'));
    expect(gateway.port).toBe(3000);
    expect(gateway.services.map((s) => s.appIdUri)).toEqual(
      SERVICES.map((s) => `${example.PUBLIC_BASE_URL}/${s}/mcp`),
    );
    expect(gateway.platform).toMatchObject({ issuer: idp.issuer, audience: idp.audience });
    for (const s of SERVICES) expect(loadToolConfig(s, ownEnvOf(`tool-${s}`)).port).toBe(3000);
    // With env.example's secrets verbatim, each refuses to start.
    expect(() => loadIdpConfig(envOf('idp'))).toThrow(ConfigError);
    expect(() => loadGatewayConfig(envOf('gateway'))).toThrow(ConfigError);
    for (const s of SERVICES) expect(() => loadToolConfig(s, envOf(`tool-${s}`))).toThrow(ConfigError);
  });

  it('lets a rotating IdP start without PLATFORM_OIDC_PRIVATE_KEY, and a static one name both ways without it', () => {
    // docs/idp.md: with rotation the key is imported once and may then be removed from deploy/.env.
    const { PLATFORM_OIDC_PRIVATE_KEY: _key, ...withoutKey } = example;
    const rotating = ownEnvOf('idp', {
      ...withoutKey,
      PLATFORM_KEY_ROTATION: 'auto',
      PLATFORM_KEY_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    });
    expect(rotating.PLATFORM_OIDC_PRIVATE_KEY).toBe('');
    const config = loadIdpConfig(rotating);
    expect(config.keyRotation).toBeDefined();
    expect(config.privateKey).toBeUndefined();
    expect(() => loadIdpConfig(ownEnvOf('idp', withoutKey))).toThrow(
      /^PLATFORM_OIDC_PRIVATE_KEY: is required .*unless PLATFORM_KEY_ROTATION=auto/,
    );
  });

  it("gives each tool server only its own identity key, the one the gateway's secret derives for it", () => {
    const secret = envOf('gateway').GATEWAY_IDENTITY_SECRET!;
    for (const s of SERVICES) {
      const env = services[`tool-${s}`]!.environment ?? {};
      expect(Object.keys(env), s).not.toContain('GATEWAY_IDENTITY_SECRET');
      expect(envOf(`tool-${s}`).TOOL_IDENTITY_KEY, s).toBe(deriveIdentityKey(secret, s));
    }
  });

  it('documents in env.example every variable it reads, and reads every one env.example sets', () => {
    // Every string in every service: image, environment, command, volumes, ports, replicas, build arguments.
    const strings = (v: unknown): string[] =>
      typeof v === 'string' ? [v] : v && typeof v === 'object' ? Object.values(v).flatMap(strings) : [];
    for (const s of Object.values(services)) for (const v of strings(s)) interpolate(v, example, used);
    // Compose's own settings, read by compose rather than interpolated.
    const own = ['COMPOSE_PROFILES', 'COMPOSE_FILE', 'COMPOSE_PROJECT_NAME'];
    const documented = Object.keys(example).filter((k) => !own.includes(k));
    expect([...used].sort()).toEqual(documented.sort());
  });
});
