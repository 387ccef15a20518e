// Redis with authentication, as the deployment must run it (Redis is reachable by more than the IdP and the
// gateway otherwise): REDIS_URL carries the credentials (`redis://user:password@host:port/db`, `rediss://` for
// TLS), and the IdP and the gateway start and work with them. Credentials Redis refuses stop start-up with one
// line naming REDIS_URL (never the password); Redis merely down does not (the gateway rides out outages).
// The Redis here is a throwaway `redis-server` with `requirepass`, two ACL users and a TLS port.
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JwksCacheCodec } from '../../gateway/jwks/store.ts';
import { jwksKey, RedisRevocationPublisher } from '../../lib/revocation.ts';
import {
  AUDIENCE,
  gatewayEnv as baseGatewayEnv,
  call,
  errorOf,
  IDENTITY_SECRET,
  type KeyServer,
  platformToken,
  startGatewayProcess,
  startKeyServer,
  startUpstream,
  type Upstream,
} from '../gateway/helpers.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { startIdpProcess, startPlatform, testSigningKeyPem } from '../helpers/processes.ts';
import { startThrowawayRedis, type ThrowawayRedis } from '../helpers/throwaway-redis.ts';
import { createTestCa, type TestCa } from '../helpers/tls.ts';

const DEFAULT_PASSWORD = `default-${randomUUID()}`;
const GATEWAY_PASSWORD = `gw-${randomUUID()}`;
const IDP_PASSWORD = `idp-${randomUUID()}`;

let redis: ThrowawayRedis;
let ca: TestCa;
let db: TestDatabase;
let ks: KeyServer;
let upstream: Upstream;

beforeAll(async () => {
  ca = await createTestCa();
  [redis, db, ks, upstream] = await Promise.all([
    startThrowawayRedis({
      password: DEFAULT_PASSWORD,
      users: [
        `gateway on >${GATEWAY_PASSWORD} ~platform:* &platform:* +@all`,
        `idp on >${IDP_PASSWORD} ~* &* +@all`,
      ],
      tls: { certFile: join(ca.dir, 'server.pem'), keyFile: join(ca.dir, 'server.key'), caFile: ca.caFile },
    }),
    createTestDatabase(),
    startKeyServer(),
    startUpstream(),
  ]);
});

afterAll(async () => {
  await redis?.stop();
  await Promise.all([ks?.close(), upstream?.close(), db?.drop()]);
  await ca?.cleanup();
});

const url = (user: string, password: string, o: { tls?: boolean; db?: number } = {}) =>
  `${o.tls ? 'rediss' : 'redis'}://${user}:${encodeURIComponent(password)}@${o.tls ? 'localhost' : '127.0.0.1'}:${o.tls ? redis.tlsPort : redis.port}/${o.db ?? 0}`;

const gatewayEnv = (redisUrl: string) =>
  baseGatewayEnv(
    { services: { mail: upstream.url }, platform: ks, redisUrl },
    // The TLS port's certificate is signed by the test CA.
    { NODE_EXTRA_CA_CERTS: ca.caFile },
  );

const token = (jti = randomUUID()) => platformToken(ks, { email: 'a@example.com', jti });

async function asUser(redisUrl: string, fn: (r: Redis) => Promise<void>): Promise<void> {
  const r = new Redis(redisUrl, { tls: redisUrl.startsWith('rediss') ? { ca: ca.ca } : undefined });
  try {
    await fn(r);
  } finally {
    r.disconnect();
  }
}

describe('the gateway with credentials in REDIS_URL', () => {
  for (const [what, redisUrl] of [
    ['an ACL user and password', () => url('gateway', GATEWAY_PASSWORD, { db: 0 })],
    [
      'the default user (requirepass), TLS (rediss://)',
      () => url('default', DEFAULT_PASSWORD, { tls: true }),
    ],
  ] as const) {
    it(`${what}: starts in sync, shares key sets and follows revocations`, async () => {
      const gw = await startGatewayProcess(gatewayEnv(redisUrl()));
      try {
        expect(gw.output()).not.toContain('listening before the revocation mirror is in sync');
        expect((await call(`${gw.url}/mail/mcp`, { method: 'POST', token: await token() })).status).toBe(200);
        // The key set went to Redis, tagged.
        await asUser(redisUrl(), async (r) => {
          const stored = new JwksCacheCodec(IDENTITY_SECRET).decode(
            ks.issuer,
            (await r.get(jwksKey(ks.issuer)))!,
            Math.floor(Date.now() / 1000),
          );
          expect(stored).toHaveProperty('jwks');
        });
        // A revocation published through this Redis reaches it.
        const jti = randomUUID();
        const revoked = await token(jti);
        await asUser(redisUrl(), (r) =>
          new RedisRevocationPublisher(r).denyJti(jti, Math.floor(Date.now() / 1000) + 3600),
        );
        await expect
          .poll(
            async () => errorOf(await call(`${gw.url}/mail/mcp`, { method: 'POST', token: revoked })).reason,
          )
          .toBe('token_revoked');
      } finally {
        await gw.stop();
      }
    });
  }

  for (const [what, redisUrl] of [
    ['a wrong password', () => url('gateway', 'not-the-password')],
    ['an unknown user', () => url('nobody', GATEWAY_PASSWORD)],
    ['no credentials at all', () => `redis://127.0.0.1:${redis.port}`],
  ] as const) {
    it(`${what}: start-up stops with one line naming REDIS_URL, exit 2, the password not printed`, async () => {
      const p = startPlatform(['gateway'], {
        ...gatewayEnv(redisUrl()),
        GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
      });
      expect(await p.exited).toBe(2);
      const lines = p.output().trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^platform: configuration error: REDIS_URL: Redis refused the credentials/);
      expect(p.output()).not.toContain(GATEWAY_PASSWORD);
      expect(p.output()).not.toContain('not-the-password');
    });
  }
});

describe('the IdP with credentials in REDIS_URL', () => {
  for (const [what, redisUrl] of [
    ['an ACL user and password', () => url('idp', IDP_PASSWORD)],
    ['TLS (rediss://)', () => url('idp', IDP_PASSWORD, { tls: true })],
  ] as const) {
    it(`${what}: starts, writes the denylist and answers health`, async () => {
      const idp = await startIdpProcess({
        databaseUrl: db.url,
        redisUrl: redisUrl(),
        env: { NODE_EXTRA_CA_CERTS: ca.caFile },
      });
      try {
        // The replay of recorded revocations into Redis runs once Redis is ready: it authenticated.
        await idp.waitFor(/revocations replayed to the denylist/);
        expect((await fetch(`${idp.url}/health`)).status).toBe(200);
        expect(idp.output()).not.toContain('redis error');
      } finally {
        await idp.stop();
      }
    });
  }

  it('a wrong password: start-up stops with one line naming REDIS_URL', async () => {
    const p = startPlatform(['idp'], {
      IDP_PORT: '0',
      PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
      PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
      PLATFORM_AUDIENCE: AUDIENCE,
      DATABASE_URL: db.url,
      REDIS_URL: url('idp', 'not-the-password'),
    });
    expect(await p.exited).not.toBe(0);
    const lines = p.output().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/REDIS_URL: Redis refused the credentials/);
    expect(p.output()).not.toContain('not-the-password');
  });
});
