// Red team: "Redis can forge any user". Whoever can write the shared Redis plants their own key set in
// `platform:jwks:<issuer>`; a gateway that believed it would accept the attacker's tokens as any user (send-as
// through mail). The gateway now uses a shared set only with a valid tag made with a key derived from
// GATEWAY_IDENTITY_SECRET, over the issuer and the exact JSON text: an untagged set, one tagged with another key,
// and a genuine tag moved from another issuer's set are all ignored and the set fetched again from the issuer.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { JwksCacheCodec } from '../../gateway/jwks/store.ts';
import { jwksKey } from '../../lib/revocation.ts';
import {
  AUDIENCE,
  call,
  type EntraTenant,
  errorOf,
  type GatewayProcess,
  gatewayEnv,
  IDENTITY_SECRET,
  type KeyServer,
  mint,
  newSigningKey,
  type SigningKey,
  startEntra,
  startGatewayProcess,
  startKeyServer,
  startUpstream,
  type Upstream,
} from '../gateway/helpers.ts';

const BASE = 'https://mcp.jwks-cache.test';
const TENANT = randomUUID();
const MAIL_CLIENT_ID = randomUUID();
const V2_ISS = `https://login.microsoftonline.com/${TENANT}/v2.0`;
const V1_ISS = `https://sts.windows.net/${TENANT}/`;

let redis: Redis;
let upstream: Upstream;
let platform: KeyServer;
let entra: EntraTenant;
let gateway: GatewayProcess;
let attackerKey: SigningKey;

beforeAll(async () => {
  redis = new Redis(inject('redisUrl'));
  [upstream, platform, entra, attackerKey] = await Promise.all([
    startUpstream(),
    startKeyServer(),
    startEntra(TENANT, MAIL_CLIENT_ID),
    newSigningKey('attacker-kid'),
  ]);
  await redis.del(jwksKey(platform.issuer), jwksKey(V2_ISS), jwksKey(V1_ISS));
  // Planted before the gateway has ever loaded a set: its very first load must not take it.
  await redis.set(jwksKey(platform.issuer), attackerJwks(), 'EX', 3600);
  gateway = await startGatewayProcess(
    gatewayEnv(
      { base: BASE, services: { mail: upstream.url }, platform, entra, redisUrl: inject('redisUrl') },
      // Every unknown kid may refresh, so every planted set below is read by the gateway.
      { GATEWAY_JWKS_COOLDOWN_SECONDS: '0' },
    ),
  );
});

afterAll(async () => {
  await gateway?.stop();
  await Promise.all([upstream?.close(), platform?.close(), entra?.close()]);
  await redis?.del(jwksKey(platform.issuer), jwksKey(V2_ISS), jwksKey(V1_ISS));
  await redis?.quit();
});

function attackerJwks(): string {
  return JSON.stringify({ keys: [attackerKey.publicJwk] });
}

/** A token of `issuer` for the mail service, as a real user of that issuer would hold (send-as needs admin). */
function claims(issuer: string): Record<string, unknown> {
  if (issuer === platform.issuer)
    return {
      iss: issuer,
      aud: AUDIENCE,
      sub: `admin-${randomUUID()}`,
      email: 'admin@example.com',
      scope: 'mcp:mail',
      client_id: 'platform-cli',
    };
  return {
    iss: issuer,
    aud: MAIL_CLIENT_ID,
    sub: `entra-${randomUUID()}`,
    preferred_username: 'admin@example.com',
    scp: 'mcp.access',
    azp: randomUUID(),
    tid: TENANT,
  };
}

const genuineKey = (issuer: string) => (issuer === platform.issuer ? platform : entra).keys[0]!;

function send(token: string) {
  return call(`${gateway.url}/mail/mcp`, {
    method: 'POST',
    token,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'send_mail', arguments: { to: 'x@example.com', as_user_email: 'ceo@example.com' } },
    }),
  });
}

const now = () => Math.floor(Date.now() / 1000);
const plantings: Array<[string, (issuer: string) => string]> = [
  ['an untagged key set', () => attackerJwks()],
  [
    'a set tagged with a key not derived from the gateway secret',
    (issuer) =>
      new JwksCacheCodec('attacker-guess-of-the-secret-0123456789abcdef').encode(
        issuer,
        attackerJwks(),
        now() + 3600,
      ),
  ],
  [
    "a genuinely tagged set moved from another issuer's key",
    () =>
      new JwksCacheCodec(IDENTITY_SECRET).encode(
        'https://other.issuer.example',
        attackerJwks(),
        now() + 3600,
      ),
  ],
  [
    'a genuinely tagged set whose JSON was altered after tagging',
    (issuer) => {
      const real = JSON.parse(
        new JwksCacheCodec(IDENTITY_SECRET).encode(issuer, JSON.stringify({ keys: [] }), now() + 3600),
      );
      return JSON.stringify({ ...real, jwks: attackerJwks() });
    },
  ],
];

describe('a key set planted in the shared Redis copy', () => {
  it('planted before the first load: the attacker token is refused, the real one works', async () => {
    const before = upstream.requests.length;
    const forged = await send(await mint({ key: attackerKey, claims: claims(platform.issuer) }));
    expect(forged.status).toBe(401);
    expect(errorOf(forged)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'unknown_kid' });
    expect(upstream.requests.length).toBe(before);
    const real = await send(
      await mint({ key: genuineKey(platform.issuer), claims: claims(platform.issuer) }),
    );
    expect(real.status).toBe(200);
  });

  for (const issuerName of ['platform', 'entra v2', 'entra v1'] as const) {
    for (const [what, plant] of plantings) {
      it(`${issuerName}: ${what} is ignored and fetched again from the issuer`, async () => {
        const issuer =
          issuerName === 'platform' ? platform.issuer : issuerName === 'entra v2' ? V2_ISS : V1_ISS;
        const c = claims(issuer);
        if (issuerName === 'entra v1') Object.assign(c, { aud: `${BASE}/mail/mcp`, ver: '1.0' });
        // The real tokens work before, so the gateway holds the genuine set in memory too.
        expect((await send(await mint({ key: genuineKey(issuer), claims: c }))).status).toBe(200);
        await redis.set(jwksKey(issuer), plant(issuer), 'EX', 3600);
        const before = upstream.requests.length;
        const forged = await send(
          await mint({ key: attackerKey, claims: { ...c, sub: `forged-${randomUUID()}` } }),
        );
        expect(forged.status, forged.text).toBe(401);
        expect(errorOf(forged)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'unknown_kid' });
        expect(upstream.requests.length).toBe(before);
        expect((await send(await mint({ key: genuineKey(issuer), claims: c }))).status).toBe(200);
        // The refetch wrote the genuine set back, tagged.
        const stored = new JwksCacheCodec(IDENTITY_SECRET).decode(
          issuer,
          (await redis.get(jwksKey(issuer)))!,
          now(),
        );
        expect(stored).toHaveProperty('jwks');
        expect(JSON.parse((stored as { jwks: string }).jwks).keys.map((k: { kid: string }) => k.kid)).toEqual(
          [genuineKey(issuer).kid],
        );
      });
    }
  }

  it('says so in the log, once per refused read, without the set itself', () => {
    const lines = gateway
      .logs()
      .filter((l) => l.msg === 'shared key set in redis ignored; fetching it from the issuer');
    expect(lines.length).toBeGreaterThanOrEqual(1 + 3 * plantings.length);
    expect(JSON.stringify(lines)).not.toContain(attackerKey.publicJwk.n as string);
  });
});
