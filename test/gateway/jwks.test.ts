// The key-set cache: refetch storms, key rotation without restart, withdrawn keys, failures that keep the
// last good keys, the shared Redis copy, and "never fetched" as a 503 rather than a client error.
import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { JwksHttpClient } from '../../gateway/jwks/http-client.ts';
import { KeySet } from '../../gateway/jwks/key-set.ts';
import { JwksCacheCodec, RedisJwksStore } from '../../gateway/jwks/store.ts';
import { createLogger } from '../../lib/logger.ts';
import { jwksKey } from '../../lib/revocation.ts';
import {
  AUDIENCE,
  errorOf,
  type GatewayProcess,
  gatewayEnv,
  IDENTITY_SECRET,
  type KeyServer,
  mint,
  newSigningKey,
  postMail as post,
  startGatewayProcess,
  startKeyServer,
  startUpstream,
  type Upstream,
} from './helpers.ts';

const TENANT = randomUUID();

let redis: Redis;
let upstream: Upstream;
const closers: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  redis = new Redis(inject('redisUrl'));
  upstream = await startUpstream();
});

afterAll(async () => {
  for (const c of closers.reverse()) await c();
  await upstream?.close();
  await redis?.quit();
});

async function keyServer(): Promise<KeyServer> {
  const ks = await startKeyServer();
  closers.push(() => ks.close());
  // Issuers are per-port URLs; a key set another run left in Redis under the same URL must not count.
  await redis.del(jwksKey(ks.issuer));
  return ks;
}

async function gateway(ks: KeyServer, env: Record<string, string> = {}): Promise<GatewayProcess> {
  const gw = await startGatewayProcess(
    gatewayEnv({ services: { mail: upstream.url }, platform: ks, redisUrl: inject('redisUrl') }, env),
  );
  closers.push(() => gw.stop());
  return gw;
}

function token(ks: KeyServer, key = ks.keys[0]!, claims: Record<string, unknown> = {}): Promise<string> {
  return mint({
    key,
    claims: {
      iss: ks.issuer,
      aud: AUDIENCE,
      sub: `s-${randomUUID()}`,
      email: 'a@example.com',
      scope: 'mcp:mail',
      ...claims,
    },
  });
}

describe('refetch storm', () => {
  it('200 concurrent tokens with random kids cause at most one key-set fetch', async () => {
    const ks = await keyServer();
    // A slow key server keeps the first fetch in flight while the storm arrives.
    ks.delayMs = 200;
    const gw = await gateway(ks, { GATEWAY_JWKS_COOLDOWN_SECONDS: '60' });
    const tokens = await Promise.all(
      Array.from({ length: 200 }, () =>
        token(ks, { ...ks.keys[0]!, kid: `random-${randomBytes(8).toString('hex')}` }),
      ),
    );
    const results = await Promise.all(tokens.map((t) => post(gw, t)));
    for (const r of results)
      expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'unknown_kid' });
    expect(ks.fetches()).toBe(1);
    // A second wave inside the cooldown fetches nothing more…
    const again = await Promise.all(
      Array.from({ length: 50 }, async () =>
        post(gw, await token(ks, { ...ks.keys[0]!, kid: randomUUID() })),
      ),
    );
    for (const r of again) expect(r.status).toBe(401);
    expect(ks.fetches()).toBe(1);
    // …and the real key still works from the one fetch.
    expect((await post(gw, await token(ks))).status).toBe(200);
    expect(ks.fetches()).toBe(1);
    // The fetched set is shared with the other replicas through Redis for an hour.
    const ttl = await redis.ttl(jwksKey(ks.issuer));
    expect(ttl).toBeGreaterThan(3500);
    expect(ttl).toBeLessThanOrEqual(3600);
    // Tagged with the gateway's key-set cache key (test/security/jwks-cache.test.ts has the attacks).
    const shared = new JwksCacheCodec(IDENTITY_SECRET).decode(
      ks.issuer,
      (await redis.get(jwksKey(ks.issuer)))!,
      Math.floor(Date.now() / 1000),
    );
    expect(JSON.parse((shared as { jwks: string }).jwks).keys[0].kid).toBe(ks.keys[0]!.kid);
    expect(gw.logs().some((l) => l.msg === 'jwks fetched' && l.status === 200)).toBe(true);
  });
});

describe('rotation', () => {
  let ks: KeyServer;
  let gw: GatewayProcess;

  beforeAll(async () => {
    ks = await keyServer();
    gw = await gateway(ks, { GATEWAY_JWKS_COOLDOWN_SECONDS: '0.3' });
  });

  it('a newly published kid is accepted without a restart', async () => {
    const old = ks.keys[0]!;
    expect((await post(gw, await token(ks))).status).toBe(200);
    const next = await newSigningKey();
    ks.keys = [old, next];
    await new Promise((r) => setTimeout(r, 350));
    const before = ks.fetches();
    expect((await post(gw, await token(ks, next))).status).toBe(200);
    expect(ks.fetches()).toBe(before + 1);
    // Both keys verify during the overlap.
    expect((await post(gw, await token(ks, old))).status).toBe(200);
  });

  it('a withdrawn key stops verifying, even for a token the gateway had cached', async () => {
    const [old, current] = ks.keys as [(typeof ks.keys)[0], (typeof ks.keys)[0]];
    const cached = await token(ks, old);
    expect((await post(gw, cached)).status).toBe(200);
    ks.keys = [current];
    await new Promise((r) => setTimeout(r, 350));
    // Any unknown kid makes the gateway look again; the refreshed set no longer has the old key.
    await post(gw, await token(ks, { ...current, kid: 'nonexistent' }));
    const r = await post(gw, cached);
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'unknown_kid' });
  });

  it('a failing key server: the last good keys keep working, refetches back off, then it recovers', async () => {
    const current = ks.keys[0]!;
    ks.failing = true;
    await new Promise((r) => setTimeout(r, 350));
    const before = ks.fetches();
    for (let i = 0; i < 20; i++) {
      const r = await post(gw, await token(ks, { ...current, kid: `gone-${i}` }));
      expect(errorOf(r).reason).toBe('unknown_kid');
    }
    // One failed attempt, then a 1 s backoff holds off the rest of the burst.
    expect(ks.fetches() - before).toBe(1);
    expect((await post(gw, await token(ks, current))).status).toBe(200);
    await expect
      .poll(() => gw.logs().some((l) => l.msg === 'jwks fetch failed; keeping the last good keys'))
      .toBe(true);
    ks.failing = false;
    const next = await newSigningKey();
    ks.keys = [current, next];
    await new Promise((r) => setTimeout(r, 1100));
    expect((await post(gw, await token(ks, next))).status).toBe(200);
  });
});

describe('never fetched', () => {
  it('answers 503 JWKS_UNAVAILABLE (not a 401) while an issuer has no key set at all', async () => {
    const ks = await keyServer();
    const entra = await keyServer();
    entra.failing = true;
    const clientId = randomUUID();
    const gw = await gateway(ks, {
      IDP_TENANT_ID: TENANT,
      ENTRA_JWKS_URL: entra.jwksUrl,
      MAIL_MCP_CLIENT_ID: clientId,
    });
    const t = await mint({
      key: entra.keys[0]!,
      claims: {
        iss: `https://login.microsoftonline.com/${TENANT}/v2.0`,
        aud: clientId,
        sub: 'x',
        preferred_username: 'a@b.c',
        scp: 'mcp.access',
      },
    });
    const r = await post(gw, t);
    expect(r.status).toBe(503);
    expect(errorOf(r)).toMatchObject({ code: 'JWKS_UNAVAILABLE', reason: 'jwks_unavailable' });
    expect(r.headers['retry-after']).toBe('2');
  });
});

describe('KeySet with the shared Redis copy', () => {
  it('a second replica takes the set from Redis instead of fetching it', async () => {
    const ks = await keyServer();
    const log = createLogger({ name: 'test', level: 'silent' });
    const http = new JwksHttpClient();
    closers.push(() => http.close());
    const store = new RedisJwksStore(redis, new JwksCacheCodec(IDENTITY_SECRET), (issuer, problem) => {
      throw new Error(`shared set of ${issuer} refused: ${problem}`);
    });
    const make = () =>
      new KeySet({
        issuer: ks.issuer,
        resolveUrl: async () => ks.jwksUrl,
        http,
        store,
        cooldownMs: 60_000,
        log,
      });
    const a = make();
    expect(await a.key(ks.keys[0]!.kid)).toBeDefined();
    expect(ks.fetches()).toBe(1);
    const b = make();
    expect(await b.key(ks.keys[0]!.kid)).toBeDefined();
    expect(ks.fetches()).toBe(1);
    // A kid the shared copy lacks still reaches the issuer (once), and the result is shared again.
    const next = await newSigningKey();
    ks.keys = [ks.keys[0]!, next];
    expect(await b.key(next.kid)).toBeDefined();
    expect(ks.fetches()).toBe(2);
    const c = make();
    expect(await c.key(next.kid)).toBeDefined();
    expect(ks.fetches()).toBe(2);
  });
});

describe("KeySet: the issuer's max-age and key notices", () => {
  const log = createLogger({ name: 'test', level: 'silent' });
  const make = (ks: KeyServer, http: JwksHttpClient) =>
    new KeySet({
      issuer: ks.issuer,
      resolveUrl: async () => ks.jwksUrl,
      http,
      store: undefined,
      cooldownMs: 60_000,
      log,
    });

  it('keeps a set for the max-age the issuer sends, so a key published meanwhile is known before it is used', async () => {
    const http = new JwksHttpClient();
    closers.push(() => http.close());
    for (const [cacheControl, refetched] of [
      ['public, max-age=1', true],
      [undefined, false],
    ] as const) {
      const ks = await keyServer();
      ks.cacheControl = cacheControl;
      const set = make(ks, http);
      expect(await set.key(ks.keys[0]!.kid)).toBeDefined();
      const next = await newSigningKey();
      ks.keys = [ks.keys[0]!, next];
      await new Promise((r) => setTimeout(r, 1200));
      // A request with the known kid after the max-age refreshes in the background; no unknown kid is needed.
      expect(set.key(ks.keys[0]!.kid)).toBeDefined();
      await set.settled();
      expect(set.key(next.kid) !== undefined && !(set.key(next.kid) instanceof Promise)).toBe(refetched);
      expect(ks.fetches()).toBe(refetched ? 2 : 1);
    }
  });

  it('withdraw() drops a kid at once, refuses it while the issuer still lists it, and refetches until the new kid is there', async () => {
    const http = new JwksHttpClient();
    closers.push(() => http.close());
    const ks = await keyServer();
    const set = make(ks, http);
    const old = ks.keys[0]!;
    expect(await set.key(old.kid)).toBeDefined();
    const next = await newSigningKey();
    // The issuer (an IdP replica that has not re-read yet) still lists the withdrawn key; the new one comes later.
    setTimeout(() => {
      ks.keys = [old, next];
    }, 700);
    const done = set.withdraw([old.kid], next.kid);
    expect(await set.key(old.kid)).toBeUndefined();
    await done;
    expect(await set.key(next.kid)).toBeDefined();
    expect(await set.key(old.kid)).toBeUndefined();
    expect(ks.fetches()).toBeGreaterThanOrEqual(3);
  });

  it('a notice without kids only makes the set stale: refreshed in the background on the next use', async () => {
    const http = new JwksHttpClient();
    closers.push(() => http.close());
    const ks = await keyServer();
    const set = make(ks, http);
    expect(await set.key(ks.keys[0]!.kid)).toBeDefined();
    await set.withdraw([], undefined);
    expect(ks.fetches()).toBe(1);
    expect(set.key(ks.keys[0]!.kid)).toBeDefined();
    await set.settled();
    expect(ks.fetches()).toBe(2);
  });
});
