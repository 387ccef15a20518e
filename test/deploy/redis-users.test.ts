// Redis as compose runs it: the very `redis-server` arguments of deploy/compose.yaml (users and their rules,
// passwords of this test's own), on a throwaway server (never the shared one). The real IdP and gateway work
// on their users — revocation written, published and mirrored (SCAN included), rate limits counted, key sets
// shared, no NOPERM anywhere — and the attacks of the red team's "Redis can forge any user" fail: no password,
// a wrong one, and each component's user reaching past what it needs.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { VerifiedToken } from '../../gateway/auth/verified-token.ts';
import { RateLimitedError } from '../../gateway/errors.ts';
import { createGatewayLimits } from '../../gateway/limits/limits.ts';
import { idJagJtiKey } from '../../idp/id-jag/index.ts';
import { RedisDpopReplayStore } from '../../lib/dpop/index.ts';
import type { Logger } from '../../lib/logger.ts';
import { RedisSingleUseStore } from '../../lib/single-use.ts';
import { postForm } from '../helpers/oauth.ts';
import { freePort } from '../helpers/processes.ts';
import { type DeployStack, startDeployStack } from './stack.ts';
import { deployFile, interpolate } from './support.ts';

const PASSWORDS = {
  REDIS_ADMIN_PASSWORD: randomBytes(16).toString('hex'),
  REDIS_IDP_PASSWORD: randomBytes(16).toString('hex'),
  REDIS_GATEWAY_PASSWORD: randomBytes(16).toString('hex'),
};
const REGISTER_LIMIT = 2;

/** compose.yaml's Redis command, interpolated as compose would with this test's passwords. */
function composeRedisArgs(): string[] {
  const compose = parse(deployFile('compose.yaml')) as { services: { redis: { command: string[] } } };
  const [program, ...args] = compose.services.redis.command.map((a) => interpolate(a, PASSWORDS));
  expect(program).toBe('redis-server');
  return args;
}

/** Each user's rules in compose.yaml's command, passwords as `>PASSWORD`. */
function composeUsers(): Map<string, string[]> {
  const compose = parse(deployFile('compose.yaml')) as { services: { redis: { command: string[] } } };
  const users = new Map<string, string[]>();
  let rules: string[] | undefined;
  let afterUser = false;
  for (const a of compose.services.redis.command.slice(1)) {
    if (a === '--user') afterUser = true;
    else if (a.startsWith('--')) rules = undefined;
    else if (afterUser) {
      afterUser = false;
      rules = [];
      users.set(a, rules);
    } else rules?.push(a.startsWith('>') ? '>PASSWORD' : a);
  }
  return users;
}

/** Each user's rules in the Swarm/Kubernetes ACL file template (a selector `(…)` is one rule). */
function aclFileUsers(): Map<string, string[]> {
  const users = new Map<string, string[]>();
  for (const line of deployFile('redis-users.acl.example').split('\n')) {
    const [word, name, ...rules] = line.match(/\([^)]*\)|\S+/g) ?? [];
    if (word !== 'user' || !name) continue;
    users.set(
      name,
      rules.map((r) => (r.startsWith('>') ? '>PASSWORD' : r)),
    );
  }
  return users;
}

let port: number;
let dir: string;
let server: ChildProcess;
let stack: DeployStack;
const clients: Redis[] = [];

const url = (user?: string, password?: string) =>
  `redis://${user ? `${user}:${password}@` : ''}127.0.0.1:${port}`;
/** A connection as `user` that reports errors instead of retrying or queueing. */
function connect(user?: string, password?: string): Redis {
  const c = new Redis(url(user, password), {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableReadyCheck: false,
  });
  c.on('error', () => {});
  clients.push(c);
  return c;
}
async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return '';
  } catch (err) {
    return (err as Error).message;
  }
}

beforeAll(async () => {
  port = await freePort();
  dir = mkdtempSync(join(tmpdir(), 'platform-redis-users-'));
  // Compose's arguments, then this test's own port, loopback and no persistence (later arguments win).
  server = spawn(
    'redis-server',
    [
      ...composeRedisArgs(),
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  server.stdout!.on('data', (d: Buffer) => (log += d));
  server.stderr!.on('data', (d: Buffer) => (log += d));
  const admin = connect('admin', PASSWORDS.REDIS_ADMIN_PASSWORD);
  const until = Date.now() + 10_000;
  for (;;) {
    if (server.exitCode !== null) throw new Error(`redis-server exited: ${log}`);
    if ((await admin.ping().catch(() => '')) === 'PONG') break;
    if (Date.now() > until) throw new Error(`redis-server did not answer: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
    admin.disconnect();
    await admin.connect().catch(() => {});
  }
  stack = await startDeployStack({
    services: ['platform'],
    live: ['platform'],
    redis: {
      idp: url('idp', PASSWORDS.REDIS_IDP_PASSWORD),
      gateway: url('gateway', PASSWORDS.REDIS_GATEWAY_PASSWORD),
    },
    idpEnv: { PLATFORM_RATE_LIMITS: `register=${REGISTER_LIMIT}/60` },
  });
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await stack?.stop();
  server?.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The gateway's verdict on a token: through authentication to the tool server (405 for GET), or refused. */
async function gatewayAccepts(token: string): Promise<boolean> {
  const res = await fetch(`${stack.gatewayUrl}/platform/mcp`, {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
  });
  const text = await res.text();
  if (res.status === 405) return true;
  if (res.status === 401 && text.includes('token_revoked')) return false;
  throw new Error(`unexpected ${res.status}: ${text.slice(0, 200)}`);
}

describe("the IdP and the gateway on their own Redis users (compose.yaml's rules)", () => {
  it('a revocation is written by the IdP, published, and refused by the gateway', async () => {
    expect(await gatewayAccepts(stack.token)).toBe(true);
    const r = await postForm(`${stack.idp.url}/oauth/revoke`, {
      token: stack.token,
      token_type_hint: 'access_token',
      client_id: 'platform-cli',
    });
    expect(r.status).toBe(200);
    const deadline = Date.now() + 5000;
    while (await gatewayAccepts(stack.token)) {
      expect(Date.now(), 'the gateway never saw the revocation').toBeLessThan(deadline);
      await new Promise((res) => setTimeout(res, 50));
    }
    const admin = connect('admin', PASSWORDS.REDIS_ADMIN_PASSWORD);
    expect(await admin.keys('platform:deny:jti:*')).toHaveLength(1);
    // The gateway shared the key set it fetched to verify the token.
    expect(await admin.keys('platform:jwks:*')).toEqual([`platform:jwks:${stack.idp.issuer}`]);
  });

  it('rate limits are counted in Redis', async () => {
    const register = () =>
      fetch(`${stack.idp.url}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ redirect_uris: ['http://127.0.0.1:5555/callback'] }),
      }).then((r) => r.status);
    for (let i = 0; i < REGISTER_LIMIT; i++) expect(await register()).toBe(201);
    expect(await register()).toBe(429);
    const admin = connect('admin', PASSWORDS.REDIS_ADMIN_PASSWORD);
    expect(await admin.keys('platform:ratelimit:*:register:*')).toHaveLength(1);
  });

  it('the gateway mirrored the denylist (subscribe, then SCAN) and neither server met a refusal', () => {
    expect(stack.gateway.output()).toContain('revocation mirror in sync with redis');
    for (const out of [stack.gateway.output(), stack.idp.output()]) {
      expect(out).not.toMatch(/NOPERM|NOAUTH|WRONGPASS/);
    }
  });
});

describe('deploy/redis-users.acl.example (the ACL file deploy/stack.yaml and Kubernetes mount)', () => {
  it("gives every user exactly compose.yaml's rules", () => {
    const compose = composeUsers();
    expect([...compose.keys()].sort()).toEqual(['admin', 'default', 'gateway', 'idp']);
    expect(aclFileUsers()).toEqual(compose);
  });
});

describe('what the red team tried', () => {
  it('without a password, or with a wrong one, Redis does nothing', async () => {
    // A connection of its own per attempt: the server ends the handshake of one without a password.
    expect(await refusal(connect().set('platform:deny:jti:x', '1'))).toMatch(/^NOAUTH/);
    expect(await refusal(connect().get('platform:jwks:x'))).toMatch(/^NOAUTH/);
    expect(await refusal(connect().flushall())).toMatch(/^NOAUTH/);
    const wrong = connect('gateway', 'not-the-password');
    expect(await refusal(wrong.get('platform:deny:jti:x'))).toMatch(/WRONGPASS/);
    // `default` cannot be used with any password.
    expect(await refusal(connect('default', 'anything').ping())).toMatch(/WRONGPASS/);
  });

  it('the gateway user reads the denylist but cannot change it, read rate limits or flush', async () => {
    const gateway = connect('gateway', PASSWORDS.REDIS_GATEWAY_PASSWORD);
    expect(await refusal(gateway.get('platform:deny:jti:x'))).toBe('');
    for (const attempt of [
      gateway.set('platform:deny:jti:x', '1'),
      gateway.del('platform:deny:sub:someone'),
      gateway.get(`platform:ratelimit:${stack.idp.issuer}:register:127.0.0.1`),
      gateway.publish('platform:revocations', JSON.stringify({ sub: 'x', cutoff: 0 })),
      gateway.flushall(),
      gateway.config('SET', 'appendonly', 'no'),
    ]) {
      expect(await refusal(attempt)).toMatch(/^NOPERM/);
    }
  });

  it("both users record DPoP proofs (SET NX EX) and see each other's", async () => {
    const idp = new RedisDpopReplayStore(connect('idp', PASSWORDS.REDIS_IDP_PASSWORD));
    const gateway = new RedisDpopReplayStore(connect('gateway', PASSWORDS.REDIS_GATEWAY_PASSWORD));
    expect(await idp.firstUse('jti-1', 'jkt', 60)).toBe(true);
    expect(await gateway.firstUse('jti-1', 'jkt', 60)).toBe(false);
    expect(await gateway.firstUse('jti-2', 'jkt', 60)).toBe(true);
  });

  it("the gateway user counts the policy file's limits in Redis; the IdP user cannot touch them", async () => {
    const conn = connect('gateway', PASSWORDS.REDIS_GATEWAY_PASSWORD);
    await conn.connect();
    const limits = createGatewayLimits([{ per: 'email', rate: { count: 1, seconds: 60 } }], {
      services: ['mail'],
      redis: () => conn,
    });
    const caller = { email: `limits-${randomBytes(4).toString('hex')}@example.com` } as VerifiedToken;
    await limits.check('mail', () => [], caller);
    await expect(limits.check('mail', () => [], caller)).rejects.toBeInstanceOf(RateLimitedError);
    // Counted in Redis, not in the insurance limiter's memory (a refused command would fall back there).
    const admin = connect('admin', PASSWORDS.REDIS_ADMIN_PASSWORD);
    const keys = await admin.keys(`platform:limits:*:${caller.email}`);
    expect(keys).toHaveLength(1);
    const idp = connect('idp', PASSWORDS.REDIS_IDP_PASSWORD);
    expect(await refusal(idp.del(keys[0]!))).toMatch(/^NOPERM/);
    // A Redis user without the rights (here the IdP's): counted in memory, and said so in the log.
    const warnings: string[] = [];
    const log = { warn: (_o: unknown, msg: string) => warnings.push(msg) } as unknown as Logger;
    const refused = createGatewayLimits([{ per: 'email', rate: { count: 1, seconds: 60 } }], {
      services: ['mail'],
      redis: () => idp,
      log,
    });
    await refused.check('mail', () => [], caller);
    await expect(refused.check('mail', () => [], caller)).rejects.toBeInstanceOf(RateLimitedError);
    expect(warnings).toContain('rate limits counted per replica: redis refused the counting command');
  });

  it('the IdP user records redeemed ID-JAGs (SET NX EX); the gateway user cannot', async () => {
    const idp = new RedisSingleUseStore(connect('idp', PASSWORDS.REDIS_IDP_PASSWORD));
    const key = idJagJtiKey('https://acme.okta.example', 'jti-1');
    expect(await idp.firstUse(key, 60)).toBe(true);
    expect(await idp.firstUse(key, 60)).toBe(false);
    const gateway = new RedisSingleUseStore(connect('gateway', PASSWORDS.REDIS_GATEWAY_PASSWORD));
    expect(await refusal(gateway.firstUse(idJagJtiKey('https://acme.okta.example', 'jti-2'), 60))).toMatch(
      /^NOPERM/,
    );
  });

  it('the IdP user cannot plant a key set or flush', async () => {
    const idp = connect('idp', PASSWORDS.REDIS_IDP_PASSWORD);
    // It may drop the gateways' shared key set (after an emergency key rotation), nothing more.
    expect(await idp.del(`platform:jwks:${stack.idp.issuer}`)).toBeGreaterThanOrEqual(0);
    expect(await refusal(idp.get(`platform:jwks:${stack.idp.issuer}`))).toMatch(/^NOPERM/);
    for (const attempt of [
      idp.set(`platform:jwks:${stack.idp.issuer}`, '{"keys":[]}'),
      idp.flushall(),
      idp.keys('*'),
    ]) {
      expect(await refusal(attempt)).toMatch(/^NOPERM/);
    }
  });
});
