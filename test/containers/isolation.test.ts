// The deployment as an attack path, tried from inside the running stack with throwaway containers (the suite's
// own images, attached to the stack's networks as a compromised container would be):
// - on the tool servers' network: Redis is not reachable at all (its name does not resolve, its address does not
//   answer), and the tool servers' database role cannot read or write the IdP's tables, `sessions` or
//   `accounts`, while it reads `users`;
// - on the Redis network: no password gets NOAUTH, and the gateway's user cannot write the denylist, read the
//   rate-limit counters or flush;
// - on the tunnel's network: clients named by Cf-Connecting-IP on the tunnel's port are counted apart, and
//   forged headers on the open port buy no fresh rate-limit bucket.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandError } from './docker.ts';
import { REGISTER_LIMIT } from './stack.ts';
import { allHealthy, docker, replicas, stack, stackPool } from './support.ts';

const pool = stackPool();
beforeAll(() => allHealthy());
afterAll(() => pool.end());

const say = (line: string) => process.stdout.write(`[isolation] ${line}\n`);
const network = (name: string) => `${stack().project}_${name}`;

/** A throwaway container on `net`: its exit code and everything it printed (a refusal is an answer here). */
async function attempt(
  net: string,
  image: string,
  entrypoint: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; out: string }> {
  const argv = [
    'run',
    '--rm',
    '--network',
    net,
    '--entrypoint',
    entrypoint,
    ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
    image,
    ...args,
  ];
  try {
    const r = await docker(argv, 60_000);
    return { code: 0, out: r.stdout + r.stderr };
  } catch (err) {
    if (!(err instanceof CommandError)) throw err;
    return { code: 1, out: err.stdout + err.stderr };
  }
}

describe("a container on the tool servers' network", () => {
  const backend = () => network('backend');

  it('cannot reach Redis: the name does not resolve, the address does not answer', async () => {
    const redis = stack().images.redis;
    const byName = await attempt(backend(), redis, 'redis-cli', ['-h', 'redis', 'ping']);
    say(`redis-cli -h redis ping from the backend network: ${byName.out.trim()}`);
    expect(byName.out).not.toContain('PONG');
    expect(byName.out).toMatch(/Could not connect|not known|Temporary failure in name resolution/);
    // Even knowing Redis's address on its own network.
    const [id] = await replicas('redis');
    const { stdout } = await docker([
      'inspect',
      '--format',
      `{{(index .NetworkSettings.Networks "${network('redis')}").IPAddress}}`,
      id!,
    ]);
    const address = stdout.trim();
    expect(address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    const byAddress = await attempt(backend(), redis, 'timeout', ['5', 'redis-cli', '-h', address, 'ping']);
    say(
      `redis-cli -h ${address} ping from the backend network: ${byAddress.out.trim() || '(no answer in 5 s)'}`,
    );
    expect(byAddress.out).not.toContain('PONG');
    expect(byAddress.code).not.toBe(0);
  });

  it("with the tool servers' database role: the IdP's tables, sessions and accounts refused; users read", async () => {
    // A session and an account to go after.
    await pool.query(`INSERT INTO users (email) VALUES ('isolation@example.com') RETURNING id`);
    const psql = (sql: string) =>
      attempt(
        backend(),
        stack().images.postgres,
        'psql',
        ['-h', 'postgres', '-U', 'platform_tools', '-d', 'platform', '-v', 'ON_ERROR_STOP=1', '-tAc', sql],
        { PGPASSWORD: stack().secrets.toolsDbPassword },
      );
    const attacks: Record<string, string> = {
      'read the refresh tokens': 'SELECT count(*) FROM platform.refresh_tokens',
      'read the signing keys': 'SELECT count(*) FROM platform.signing_keys',
      'delete the revocations': 'DELETE FROM platform.revocations',
      'add an entitlement': `INSERT INTO platform.entitlement_grants (email, service, granted_by) VALUES ('x@example.com', 'deals', 'x')`,
      'read the sessions': 'SELECT count(*) FROM sessions',
      'plant a session': `INSERT INTO sessions ("userId", expires, "sessionToken") SELECT id, now() + interval '1 day', 'planted' FROM users LIMIT 1`,
      'read the accounts': 'SELECT count(*) FROM accounts',
    };
    for (const [attack, sql] of Object.entries(attacks)) {
      const r = await psql(sql);
      say(`${attack}: ${r.out.trim()}`);
      expect(r.code, attack).not.toBe(0);
      expect(r.out, attack).toMatch(/permission denied for (table|sequence)/);
    }
    const users = await psql('SELECT count(*) FROM users');
    expect(users.code, users.out).toBe(0);
    expect(Number(users.out.trim())).toBeGreaterThan(0);
  });
});

describe("a container on the Redis network (the IdP's and the gateway's)", () => {
  const cli = (args: string[], env: Record<string, string> = {}) =>
    attempt(
      network('redis'),
      stack().images.redis,
      'redis-cli',
      ['--no-auth-warning', '-h', 'redis', ...args],
      env,
    );

  it('gets nothing without a password', async () => {
    for (const args of [['set', 'platform:deny:jti:x', '1'], ['get', 'platform:jwks:x'], ['flushall']]) {
      const r = await cli(args);
      expect(r.out, args.join(' ')).toMatch(/NOAUTH/);
    }
  });

  it("with the gateway's user: reads the denylist, cannot write it, read rate limits or flush", async () => {
    const gateway = (args: string[]) =>
      cli(['--user', 'gateway', ...args], { REDISCLI_AUTH: stack().secrets.redisGatewayPassword });
    const read = await gateway(['get', 'platform:deny:jti:x']);
    expect(read.out).not.toMatch(/NOPERM|NOAUTH|WRONGPASS/);
    for (const args of [
      ['set', 'platform:deny:jti:x', '1'],
      ['del', 'platform:deny:sub:someone'],
      ['--scan', '--pattern', 'platform:ratelimit:*'],
      ['get', `platform:ratelimit:${stack().baseUrl}:register:127.0.0.1`],
      ['flushall'],
    ]) {
      const r = await gateway(args);
      say(`gateway user: ${args.join(' ')} → ${r.out.trim() || '(nothing)'}`);
      // SCAN lists names (Redis does not filter it by key pattern) but GET on them is refused; the rest NOPERM.
      if (args[0] === '--scan') continue;
      expect(r.out, args.join(' ')).toMatch(/NOPERM/);
    }
  });
});

describe("rate limits behind the stack's proxy, from the tunnel's network", () => {
  it('counts each Cf-Connecting-IP on the tunnel port apart; forged headers on the open port buy nothing', async () => {
    // What cloudflared does (one container, the client's address in Cf-Connecting-IP), and a forger on the
    // open port; run from the `edge` network in the Node image.
    const script = `
      const register = (url, headers) => fetch(url + '/oauth/register', {
        method: 'POST', headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ redirect_uris: ['http://127.0.0.1:5555/callback'] }),
      }).then((r) => r.status);
      const n = ${REGISTER_LIMIT} + 1;
      const out = { a: [], b: [], forged: [] };
      for (let i = 0; i < n; i++) out.a.push(await register('http://proxy:81', { 'cf-connecting-ip': '203.0.113.7' }));
      out.b.push(await register('http://proxy:81', { 'cf-connecting-ip': '203.0.113.8' }));
      for (let i = 0; i < n; i++)
        out.forged.push(await register('http://proxy:80', {
          'cf-connecting-ip': '198.51.100.' + (i + 1), 'x-forwarded-for': '198.51.100.' + (i + 100) }));
      console.log(JSON.stringify(out));`;
    const r = await attempt(network('edge'), stack().images.node, 'node', [
      '--input-type=module',
      '-e',
      script,
    ]);
    expect(r.code, r.out).toBe(0);
    const out = JSON.parse(r.out.trim().split('\n').at(-1)!) as Record<string, number[]>;
    say(`registrations through the proxy: ${JSON.stringify(out)}`);
    const limited = [...Array(REGISTER_LIMIT).fill(201), 429];
    expect(out.a).toEqual(limited);
    expect(out.b).toEqual([201]);
    expect(out.forged).toEqual(limited);
  });
});
