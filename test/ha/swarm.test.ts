// deploy/stack.yaml on a real Docker Swarm: a private engine in a network namespace (test/ha/swarm-cluster.ts),
// the previous release's image and this checkout's built with the container suite's recipe and `docker load`ed
// into it, `docker stack deploy --resolve-image never` of the previous release, then the upgrade as
// docs/operations.md § Upgrading says (the migration with the new image, then `docker service update --image` of
// the IdP and the gateway) under sign-ins, refreshes, revocations and tool calls: not one may fail. Then rolling
// updates of the gateway and of a tool server while tool calls run at 25 a second through the proxy. Then a second node joins over the hub bridge and takes
// replicas. Postgres comes from test/ha/stack.test.yaml (the deployment's is outside the stack); every secret
// is a Swarm secret read through <NAME>_FILE, as in production.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exportPKCS8, generateKeyPair } from 'jose';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { release } from '../../lib/version.ts';
import { loadContainerSuiteConfig } from '../containers/config.ts';
import { ensureEngine, run } from '../containers/docker.ts';
import { buildImages, REPO_DIR } from '../containers/images.ts';
import { type CallOutcome, callTool, proposal, summary } from '../containers/load.ts';
import { seedUser } from '../helpers/database.ts';
import { CLI, postForm, refresh, signIn } from '../helpers/oauth.ts';
import { checkoutPreviousRelease, type PreviousRelease } from '../helpers/previous-release.ts';
import { DOCKER, PrivateSwarm, SHARED, type SwarmNode } from './swarm-cluster.ts';

const STACK = 'pswt';
const RATE = 25;
const FRONT_SUBNET = '10.239.250.0/24';

let swarm: PrivateSwarm | undefined;
let node1: SwarmNode;
let baseUrl = '';
let token = '';
let signingKeys: { kid: string; origin: string }[] = [];
let platformImage = '';
/** The previous release's image (CHANGELOG.md's newest release), which the stack is deployed with first. */
let previousImage = '';
let previous: PreviousRelease | undefined;
let userSessions: string[] = [];
/** The stack's Postgres from the host (the test's own overlay publishes it on node 1). */
let databaseUrl = '';
/** `docker stack deploy` of a checkout's deploy/ files (the previous release's, or this one's) with an image. */
let deployStack: (repo: string, image: string) => Promise<unknown>;
const secret = () => randomBytes(16).toString('hex');

/**
 * The stand-in images of the container suite on the shared engine (started as the container suite starts it when
 * it is silent: `make test-ha` may run without `make test` before it); built by its recipe when one is missing.
 */
async function images(): Promise<Record<'node' | 'postgres' | 'redis' | 'caddy', string>> {
  await ensureEngine(loadContainerSuiteConfig());
  const find = async (name: string) =>
    (
      await run(DOCKER, [
        ...SHARED,
        'images',
        `platform-test/${name}`,
        '--format',
        '{{.Repository}}:{{.Tag}}',
      ])
    ).stdout
      .split('\n')
      .filter(Boolean)[0];
  let found = {
    node: await find('node'),
    postgres: await find('postgres'),
    redis: await find('redis'),
    caddy: await find('caddy'),
  };
  if (Object.values(found).some((v) => v === undefined)) {
    const built = (await buildImages(loadContainerSuiteConfig())).images;
    found = { node: built.node, postgres: built.postgres, redis: built.redis, caddy: built.caddy };
  }
  return found as Record<'node' | 'postgres' | 'redis' | 'caddy', string>;
}

async function waitFor(what: string, ms: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

const docker = (args: string[], timeoutMs?: number) => swarm!.docker(node1, args, { timeoutMs });
const taskIds = async (service: string) =>
  (await docker(['service', 'ps', `${STACK}_${service}`, '--filter', 'desired-state=running', '-q'])).stdout
    .split('\n')
    .filter(Boolean)
    .sort();

/** Tool calls at RATE a second until `during` has finished (and 2 s more), every outcome kept. */
async function underLoad(service: string, during: () => Promise<void>): Promise<CallOutcome[]> {
  const pending: Array<Promise<CallOutcome>> = [];
  let done = false;
  const fault = during().finally(() => {
    done = true;
  });
  const t0 = performance.now();
  let doneAt = Number.POSITIVE_INFINITY;
  for (let i = 0; ; i++) {
    const due = t0 + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    if (done && doneAt === Number.POSITIVE_INFINITY) doneAt = performance.now();
    if (performance.now() > doneAt + 2000) break;
    const args = service === 'deals' ? proposal(`swarm-${randomBytes(3).toString('hex')}`) : {};
    pending.push(
      callTool({
        baseUrl,
        service,
        token,
        tool: service === 'deals' ? 'propose_deal_closure' : 'whoami',
        args,
      }),
    );
  }
  await fault;
  return Promise.all(pending);
}

describe('deploy/stack.yaml on a private Docker Swarm', () => {
  beforeAll(async () => {
    const img = await images();
    // The image of this checkout (its own tag: the shared engine's platform-test/platform-identity:latest may
    // be another checkout's), with the container suite's Node stand-in as NODE_IMAGE.
    previous = checkoutPreviousRelease();
    previousImage = `platform-swarm-test/platform-identity:${previous.version}-${process.pid}`;
    const build = (dir: string, tag: string) =>
      run(
        DOCKER,
        [
          ...SHARED,
          'build',
          '-q',
          '-f',
          join(dir, 'deploy/Dockerfile'),
          '--build-arg',
          `NODE_IMAGE=${img.node}`,
          '-t',
          tag,
          dir,
        ],
        { env: { ...process.env, DOCKER_BUILDKIT: '1' }, timeoutMs: 600_000 },
      );
    // This checkout's image by the documented command (make image: labelled with the release), the previous
    // release's as it was built then.
    const imageName = `platform-swarm-test/platform-identity-${process.pid}`;
    await run(
      'make',
      ['-s', '-C', REPO_DIR, 'image', `IMAGE=${imageName}`, `NODE_IMAGE=${img.node}`, `DOCKER=${DOCKER}`],
      {
        env: { ...process.env, DOCKER_BUILDKIT: '1' },
        timeoutMs: 600_000,
      },
    );
    platformImage = `${imageName}:${release().version}`;
    await build(previous.dir, previousImage);
    swarm = await PrivateSwarm.create();
    node1 = await swarm.addNode();
    await docker(['swarm', 'init', '--advertise-addr', node1.address]);
    const self = (await docker(['node', 'ls', '-q'])).stdout.trim();
    await docker(['node', 'update', '--label-add', 'platform.redis=true', self]);
    await swarm.load(node1, [previousImage, platformImage, img.postgres, img.redis, img.caddy]);

    // The secrets, one file each, as an operator writes them (docs/deploy.md § Swarm).
    const dir = join(swarm.dir, 'secrets');
    const pgPassword = secret();
    const [admin, idp, gw] = [secret(), secret(), secret()];
    const identitySecret = `swarm-${secret()}${secret()}`;
    const redisAcl = readFileSync(join(REPO_DIR, 'deploy/redis-users.acl.example'), 'utf8')
      .replace('ADMIN_PASSWORD', admin)
      .replace('IDP_PASSWORD', idp)
      .replace('GATEWAY_PASSWORD', gw);
    // The test's Postgres has one role: every component connects as it (role separation is compose's test).
    const dbUrl = `postgresql://platform:${pgPassword}@postgres:5432/platform`;
    const { privateKey } = await generateKeyPair('RS256', { extractable: true });
    const files: Record<string, string> = {
      'redis-users.acl': redisAcl,
      'redis-admin-password': admin,
      'migrate-database-url': dbUrl,
      'idp-database-url': dbUrl,
      'tools-database-url': dbUrl,
      'idp-redis-url': `redis://idp:${idp}@redis:6379`,
      'gateway-redis-url': `redis://gateway:${gw}@redis:6379`,
      'oidc-private-key': await exportPKCS8(privateKey),
      // deploy/stack.key-rotation.yaml's: the IdP keeps its signing keys in Postgres, sealed under this.
      'key-encryption-key': `swarm-${secret()}${secret()}`,
      'gateway-identity-secret': identitySecret,
      ...Object.fromEntries(
        ['platform', 'mail', 'deals'].map((s) => [
          `${s}-tool-identity-key`,
          deriveIdentityKey(identitySecret, s),
        ]),
      ),
    };
    (await import('node:fs')).mkdirSync(dir, { mode: 0o700 });
    for (const [name, value] of Object.entries(files))
      writeFileSync(join(dir, name), `${value}\n`, { mode: 0o600 });

    baseUrl = `http://${node1.address}:8080`;
    // The previous release, deployed with its own stack files (what an operator has running before the
    // upgrade); the upgrade test then rolls it to this checkout's image and files.
    deployStack = (repo: string, image: string) =>
      swarm!.docker(
        node1,
        [
          'stack',
          'deploy',
          '--resolve-image',
          'never',
          '-c',
          'stack.yaml',
          '-c',
          'stack.key-rotation.yaml',
          '-c',
          '../test/ha/stack.test.yaml',
          STACK,
        ],
        {
          cwd: join(repo, 'deploy'),
          env: {
            ...process.env,
            PLATFORM_SECRETS_DIR: dir,
            PUBLIC_BASE_URL: baseUrl,
            PLATFORM_OIDC_ISSUER: baseUrl,
            PLATFORM_AUDIENCE: baseUrl,
            FRONT_SUBNET,
            PLATFORM_IMAGE: image,
            REDIS_IMAGE: img.redis,
            CADDY_IMAGE: img.caddy,
            POSTGRES_IMAGE: img.postgres,
            POSTGRES_PASSWORD: pgPassword,
            PLATFORM_RATE_LIMITS: 'token=100000/60,revoke=100000/60',
          },
          timeoutMs: 300_000,
        },
      );
    await deployStack(previous.dir, previousImage);
    // The web application's tables, as in the container suite: the tool servers restart until they exist.
    databaseUrl = `postgresql://platform:${pgPassword}@${node1.address}:5432/platform`;
    const pool = new pg.Pool({
      connectionString: databaseUrl,
      max: 2,
      connectionTimeoutMillis: 3000,
    });
    pool.on('error', () => {});
    try {
      await waitFor('postgres', 120_000, async () => (await pool.query('SELECT 1')).rowCount === 1);
      await pool.query(readFileSync(join(REPO_DIR, 'idp/authjs/schema.sql'), 'utf8'));
      for (const s of ['platform', 'mail', 'deals'])
        await waitFor(
          `proxy → gateway → ${s}`,
          180_000,
          async () => (await fetch(`${baseUrl}/${s}/health`)).ok,
        );
      const user = await seedUser(pool);
      userSessions = await Promise.all([1, 2, 3].map(async () => (await seedUser(pool)).sessionToken));
      token = (
        await signIn(baseUrl, user.sessionToken, { scope: 'openid email mcp:platform mcp:mail mcp:deals' })
      ).access_token;
      signingKeys = (
        await pool.query<{ kid: string; origin: string }>(
          'SELECT kid, origin FROM platform.rotating_keys ORDER BY activate_at',
        )
      ).rows;
    } finally {
      await pool.end();
    }
  }, 600_000);

  afterAll(async () => {
    await swarm?.teardown();
    const latest = platformImage.replace(/:[^:]+$/, ':latest');
    for (const image of [platformImage, latest, previousImage].filter(Boolean))
      await run(DOCKER, [...SHARED, 'rmi', image]).catch(() => {});
    previous?.remove();
  }, 180_000);

  it('labels the image with its release (make image), and the image knows its commit', async () => {
    const labels = JSON.parse(
      (
        await run(DOCKER, [
          ...SHARED,
          'image',
          'inspect',
          platformImage,
          '--format',
          '{{json .Config.Labels}}',
        ])
      ).stdout,
    ) as Record<string, string>;
    const head = (await run('git', ['-C', REPO_DIR, 'rev-parse', 'HEAD'])).stdout.trim();
    expect(labels).toMatchObject({
      'org.opencontainers.image.version': release().version,
      'org.opencontainers.image.revision': head,
    });
    expect(labels['org.opencontainers.image.source']).not.toBe('');
    const printed = (await run(DOCKER, [...SHARED, 'run', '--rm', platformImage, '--version'])).stdout.trim();
    expect(printed).toBe(`${release().version} (commit ${head.slice(0, 12)})`);
  });

  it('runs the IdP with signing-key rotation (stack.key-rotation.yaml): the static key imported, and signing', () => {
    expect(signingKeys.map((k) => k.origin)).toEqual(['imported']);
    const header = JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString('utf8'));
    expect(header.kid).toBe(signingKeys[0]!.kid);
  });

  it('upgrades from the previous release as documented, under sign-ins, refreshes, revocations and tool calls: nothing fails', async () => {
    const imageOf = async (service: string) =>
      (
        await docker([
          'service',
          'inspect',
          `${STACK}_${service}`,
          '--format',
          '{{.Spec.TaskTemplate.ContainerSpec.Image}}',
        ])
      ).stdout.trim();
    expect(await imageOf('idp')).toBe(previousImage);
    const failures: string[] = [];
    const done = { signIns: 0, refreshes: 0, revocations: 0 };
    let running = true;
    const pick = <T>(l: readonly T[]) => l[Math.floor(Math.random() * l.length)]!;
    const signInLoop = async () => {
      while (running) {
        // A steady load, not a flood: a few sign-ins a second per loop beside the 25 tool calls a second.
        await new Promise((r) => setTimeout(r, 100));
        const t = await signIn(baseUrl, pick(userSessions)).catch((err: unknown) => {
          failures.push(`sign-in: ${err}`);
        });
        if (!t) continue;
        done.signIns++;
        const r = await callTool({
          baseUrl,
          service: 'platform',
          token: t.access_token,
          tool: 'whoami',
          args: {},
        });
        if (!r.ok) failures.push(`tool call after sign-in: ${r.status} ${r.detail}`);
        // A refresh, then the refreshed token used; then the sign-in revoked (RFC 7009) and refused within 1 s.
        const r2 = await refresh(baseUrl, t.refresh_token);
        if (r2.status !== 200) {
          failures.push(`refresh: ${r2.status} ${r2.text}`);
          continue;
        }
        done.refreshes++;
        const access = r2.json.access_token as string;
        const r3 = await callTool({ baseUrl, service: 'platform', token: access, tool: 'whoami', args: {} });
        if (!r3.ok) failures.push(`tool call after refresh: ${r3.status} ${r3.detail}`);
        const rv = await postForm(`${baseUrl}/oauth/revoke`, {
          token: r2.json.refresh_token as string,
          client_id: CLI,
        });
        if (rv.status !== 200) {
          failures.push(`revoke: ${rv.status} ${rv.text}`);
          continue;
        }
        done.revocations++;
        // Refused within the bound, and then by every gateway replica the proxy reaches (six in a row).
        const deadline = Date.now() + 1000;
        let refusedInARow = 0;
        while (refusedInARow < 6) {
          const c = await callTool({ baseUrl, service: 'platform', token: access, tool: 'whoami', args: {} });
          if (c.status === 401 && c.detail.includes('token_revoked')) refusedInARow++;
          else if (Date.now() > deadline) {
            failures.push(`revoked token still answered ${c.status} after 1 s`);
            break;
          } else refusedInARow = 0;
        }
      }
    };
    const loops = [signInLoop(), signInLoop()];
    const calls = await underLoad('platform', async () => {
      // 1. The migration, with the new image; done when the database has every migration of this checkout.
      await docker(['service', 'update', '--detach', '--image', platformImage, `${STACK}_migrate`]);
      const expected = ['idp', 'tools'].flatMap((component) =>
        readdirSync(join(REPO_DIR, component, 'migrations'))
          .filter((f) => /^\d+_[\w-]+\.sql$/.test(f))
          .map((f) => `${component}/${f.replace(/\.sql$/, '')}`),
      );
      const pool = new pg.Pool({ connectionString: databaseUrl, max: 1, connectionTimeoutMillis: 3000 });
      pool.on('error', () => {});
      try {
        await waitFor("the new release's migration", 180_000, async () => {
          const { rows } = await pool.query<{ id: string }>(
            "SELECT component || '/' || version AS id FROM platform.schema_migrations",
          );
          const applied = new Set(rows.map((r) => r.id));
          return expected.every((m) => applied.has(m));
        });
      } finally {
        await pool.end();
      }
      // 2. The IdP and the gateway, one replica at a time (the stack's update_config).
      for (const service of ['idp', 'gateway'])
        await docker(
          [
            'service',
            'update',
            '--detach=false',
            '--image',
            platformImage,
            '--update-delay',
            '1s',
            '--update-monitor',
            '5s',
            `${STACK}_${service}`,
          ],
          300_000,
        );
    });
    running = false;
    await Promise.all(loops);
    // 3. This release's stack files with its image (the tool servers, and whatever the files changed); the
    // later tests run on them.
    await deployStack(REPO_DIR, platformImage);
    for (const service of ['idp', 'gateway', 'tool-platform', 'tool-mail', 'tool-deals'])
      await waitFor(`${service} converged on this release`, 300_000, async () => {
        const tasks = (
          await docker([
            'service',
            'ps',
            `${STACK}_${service}`,
            '--filter',
            'desired-state=running',
            '--format',
            '{{.Image}} {{.CurrentState}}',
          ])
        ).stdout
          .split('\n')
          .filter(Boolean);
        return tasks.length > 0 && tasks.every((t) => t.startsWith(`${platformImage} Running`));
      });
    for (const s of ['platform', 'mail', 'deals'])
      await waitFor(
        `proxy → gateway → ${s} after the upgrade`,
        120_000,
        async () => (await fetch(`${baseUrl}/${s}/health`)).ok,
      );
    process.stdout.write(
      `[swarm] upgrade ${previous!.version} -> this checkout: ${calls.length} tool calls (${summary(calls)}), ${done.signIns} sign-ins, ${done.refreshes} refreshes, ${done.revocations} revocations\n`,
    );
    for (const service of ['idp', 'gateway', 'tool-platform', 'tool-mail', 'tool-deals'])
      expect(await imageOf(service), service).toBe(platformImage);
    expect(failures).toEqual([]);
    expect(calls.filter((o) => !o.ok).map((o) => `${o.status} ${o.detail}`)).toEqual([]);
    expect(done.signIns).toBeGreaterThan(5);
    expect(done.revocations).toBeGreaterThan(5);
  }, 900_000);

  it('rolls the gateway, then the deals server, under 25 tool calls a second: no call fails', async () => {
    for (const [service, svc] of [
      ['gateway', 'deals'],
      ['tool-deals', 'deals'],
    ] as const) {
      const before = await taskIds(service);
      const spec = JSON.parse(
        (
          await docker([
            'service',
            'inspect',
            `${STACK}_${service}`,
            '--format',
            '{{json .Spec.UpdateConfig}}',
          ])
        ).stdout,
      );
      expect(spec).toMatchObject({ Order: 'start-first', FailureAction: 'rollback' });
      // --force replaces every task under the service's own update_config; only the pauses are shortened.
      const outcomes = await underLoad(svc, async () => {
        await docker(
          [
            'service',
            'update',
            '--force',
            '--detach=false',
            '--update-delay',
            '1s',
            '--update-monitor',
            '5s',
            `${STACK}_${service}`,
          ],
          240_000,
        );
      });
      const after = await taskIds(service);
      expect(
        after.filter((t) => before.includes(t)),
        `${service}: every task replaced`,
      ).toEqual([]);
      const seconds = (outcomes.at(-1)!.start - outcomes[0]!.start) / 1000;
      process.stdout.write(
        `[swarm] ${service}: ${outcomes.length} calls over ${seconds.toFixed(1)} s: ${summary(outcomes)}\n`,
      );
      expect(outcomes.length / seconds).toBeGreaterThanOrEqual(20);
      expect(outcomes.filter((o) => !o.ok).map((o) => `${o.status} ${o.detail}`)).toEqual([]);
    }
  });

  it('a second node joins over the hub bridge and runs replicas that answer', async () => {
    const node2 = await swarm!.addNode();
    const joinToken = (await docker(['swarm', 'join-token', '-q', 'worker'])).stdout.trim();
    await swarm!.docker(node2, [
      'swarm',
      'join',
      '--token',
      joinToken,
      '--advertise-addr',
      node2.address,
      `${node1.address}:2377`,
    ]);
    await swarm!.load(node2, [platformImage]);
    await docker(['service', 'scale', '--detach=false', `${STACK}_tool-deals=4`], 240_000);
    const nodes = (
      await docker([
        'service',
        'ps',
        `${STACK}_tool-deals`,
        '--filter',
        'desired-state=running',
        '--format',
        '{{.Node}} {{.CurrentState}}',
      ])
    ).stdout;
    const hostname2 = (await swarm!.docker(node2, ['info', '--format', '{{.Name}}'])).stdout.trim();
    const self1 = (await docker(['info', '--format', '{{.Name}}'])).stdout.trim();
    process.stdout.write(`[swarm] tool-deals tasks:\n${nodes}`);
    // Both daemons share this machine's hostname; the node IDs tell them apart.
    const ids = (await docker(['node', 'ls', '--format', '{{.ID}} {{.Hostname}} {{.Status}}'])).stdout;
    expect(ids.trim().split('\n')).toHaveLength(2);
    expect(hostname2).toBe(self1);
    const onNode2 = (
      await docker([
        'service',
        'ps',
        `${STACK}_tool-deals`,
        '--filter',
        'desired-state=running',
        '--filter',
        `node=${(await swarm!.docker(node2, ['info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim()}`,
        '-q',
      ])
    ).stdout
      .split('\n')
      .filter(Boolean);
    expect(onNode2.length).toBeGreaterThan(0);
    const outcomes = await underLoad('deals', () => new Promise((r) => setTimeout(r, 4000)));
    expect(outcomes.filter((o) => !o.ok).map((o) => `${o.status} ${o.detail}`)).toEqual([]);
  });
});
