// Rate limits on register, token, revoke and device_authorization: per client address, shared by replicas
// through Redis, X-Forwarded-For believed only from trusted proxies. Every request here carries a random
// client address (a random X-Forwarded-For through the trusted 127.0.0.1, or a random 127.x.y.z source
// address), so parallel runs on the shared Redis never share a counter.

import { randomInt } from 'node:crypto';
import { request } from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DEFAULT_RATE_LIMITS, parseRateLimits } from '../../idp/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { type IdpProcess, startIdpProcess, startPlatform, testSigningKeyPem } from '../helpers/processes.ts';

let db: TestDatabase;
let a: IdpProcess;
let b: IdpProcess;
let redis: Redis;
const LIMITS = 'register=5/60,token=4/60,revoke=3/60,device=2/60';

const randomIp = () => `203.0.${randomInt(0, 256)}.${randomInt(1, 255)}`;

beforeAll(async () => {
  db = await createTestDatabase();
  a = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_RATE_LIMITS: LIMITS, PLATFORM_TRUSTED_PROXIES: '127.0.0.1,10.0.0.0/8' },
  });
  // A second replica of the same provider (same issuer), on its own port.
  b = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: {
      PLATFORM_RATE_LIMITS: LIMITS,
      PLATFORM_TRUSTED_PROXIES: '127.0.0.1,10.0.0.0/8',
      PLATFORM_OIDC_ISSUER: a.issuer,
    },
  });
  redis = new Redis(inject('redisUrl'));
});

afterAll(async () => {
  redis?.disconnect();
  await a?.stop();
  await b?.stop();
  await db?.drop();
});

interface Sent {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: Record<string, unknown>;
}

/** A raw request (node:http) so the source address and X-Forwarded-For are exactly what the test says. */
function send(
  url: string,
  o: { body: string; contentType: string; xff?: string; localAddress?: string },
): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request(
      {
        host: '127.0.0.1',
        port: u.port,
        path: u.pathname,
        method: 'POST',
        localAddress: o.localAddress,
        agent: false,
        headers: {
          'content-type': o.contentType,
          ...(o.xff ? { 'x-forwarded-for': o.xff } : {}),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (c) => {
          text += c;
        });
        res.on('end', () => {
          let json: Record<string, unknown> = {};
          try {
            json = JSON.parse(text);
          } catch {
            // empty body (revoke)
          }
          resolve({ status: res.statusCode!, headers: res.headers, json });
        });
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

const registration = JSON.stringify({ redirect_uris: ['http://127.0.0.1:5555/callback'] });
const register = (base: string, xff?: string, localAddress?: string) =>
  send(`${base}/oauth/register`, { body: registration, contentType: 'application/json', xff, localAddress });
const form = (path: string, body: string, xff: string, base = a.url) =>
  send(`${base}${path}`, { body, contentType: 'application/x-www-form-urlencoded', xff });

describe('a flood of registrations', () => {
  it('gets 429 temporarily_unavailable with Retry-After once over the limit', async () => {
    const ip = randomIp();
    for (let i = 0; i < 5; i++) expect((await register(a.url, ip)).status).toBe(201);
    const r = await register(a.url, ip);
    expect(r.status).toBe(429);
    expect(r.json.error).toBe('temporarily_unavailable');
    expect(typeof r.json.error_description).toBe('string');
    const retry = Number(r.headers['retry-after']);
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
    // Another address is not affected.
    expect((await register(a.url, randomIp())).status).toBe(201);
  });

  it('is counted once across replicas (Redis), per provider', async () => {
    const ip = randomIp();
    for (let i = 0; i < 3; i++) expect((await register(a.url, ip)).status).toBe(201);
    for (let i = 0; i < 2; i++) expect((await register(b.url, ip)).status).toBe(201);
    expect((await register(b.url, ip)).status).toBe(429);
    expect((await register(a.url, ip)).status).toBe(429);
    const keys = await redis.keys(`platform:ratelimit:${a.issuer}:register:${ip}`);
    expect(keys).toHaveLength(1);
  });

  it('reads X-Forwarded-For from the right: a forged left-most entry does not escape the limit', async () => {
    const ip = randomIp();
    for (let i = 0; i < 5; i++) expect((await register(a.url, `${randomIp()}, ${ip}`)).status).toBe(201);
    expect((await register(a.url, `${randomIp()}, ${ip}`)).status).toBe(429);
    // Trusted hops on the right (10.0.0.0/8 here) are skipped.
    expect((await register(a.url, `${randomIp()}, ${ip}, 10.1.2.3`)).status).toBe(429);
  });

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy', async () => {
    // A source address of its own on the loopback network: not 127.0.0.1, so not trusted.
    const peer = `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
    for (let i = 0; i < 5; i++) expect((await register(a.url, randomIp(), peer)).status).toBe(201);
    const r = await register(a.url, randomIp(), peer);
    expect(r.status).toBe(429);
  });
});

describe('the other limited endpoints', () => {
  it('token, revoke and device_authorization count even refused requests', async () => {
    const ip = randomIp();
    for (let i = 0; i < 4; i++) expect((await form('/oauth/token', 'grant_type=x', ip)).status).toBe(400);
    expect((await form('/oauth/token', 'grant_type=x', ip)).status).toBe(429);
    for (let i = 0; i < 3; i++) expect((await form('/oauth/revoke', 'token=unknown', ip)).status).toBe(200);
    expect((await form('/oauth/revoke', 'token=unknown', ip)).status).toBe(429);
    for (let i = 0; i < 2; i++)
      expect((await form('/oauth/device_authorization', 'client_id=x', ip)).status).not.toBe(429);
    expect((await form('/oauth/device_authorization', 'client_id=x', ip)).status).toBe(429);
  });

  it('does not limit what is not listed (discovery)', async () => {
    for (let i = 0; i < 10; i++) {
      const r = await fetch(`${a.url}/.well-known/openid-configuration`);
      expect(r.status).toBe(200);
    }
  });
});

describe('PLATFORM_RATE_LIMITS', () => {
  it('keeps the default for an endpoint left out', () => {
    const l = parseRateLimits('register=20/60');
    expect(l.register).toEqual({ points: 20, seconds: 60 });
    expect(l.token).toEqual(DEFAULT_RATE_LIMITS.token);
    expect(parseRateLimits(undefined)).toEqual(DEFAULT_RATE_LIMITS);
  });

  const bad: Array<[string, Record<string, string>, RegExp]> = [
    [
      'an unknown endpoint',
      { PLATFORM_RATE_LIMITS: 'login=5/60' },
      /PLATFORM_RATE_LIMITS: unknown endpoint "login"/,
    ],
    ['a malformed entry', { PLATFORM_RATE_LIMITS: 'token=5' }, /PLATFORM_RATE_LIMITS: "token=5"/],
    ['a zero count', { PLATFORM_RATE_LIMITS: 'token=0/60' }, /PLATFORM_RATE_LIMITS: .*at least 1/],
    ['a bad proxy', { PLATFORM_TRUSTED_PROXIES: '10.0.0.0/33' }, /PLATFORM_TRUSTED_PROXIES: "10.0.0.0\/33"/],
    ['a proxy name', { PLATFORM_TRUSTED_PROXIES: 'proxy.local' }, /PLATFORM_TRUSTED_PROXIES: "proxy.local"/],
  ];
  for (const [name, env, message] of bad) {
    it(`${name} stops start-up with one line naming the variable`, async () => {
      const p = startPlatform(['idp'], {
        IDP_PORT: '0',
        PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
        PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
        PLATFORM_AUDIENCE: 'aud',
        DATABASE_URL: db.url,
        REDIS_URL: inject('redisUrl'),
        ...env,
      });
      expect(await p.exited).not.toBe(0);
      const out = p.output().trim();
      expect(out).toMatch(message);
      expect(out.split('\n')).toHaveLength(1);
    });
  }
});
