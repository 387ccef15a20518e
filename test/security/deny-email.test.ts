// Attack: a user removed by `revoke-user` keeps using tokens the platform IdP never issued — an HS256 service
// token or an Entra token carrying the same email. The IdP writes `platform:deny:email:<email>` and publishes
// `{"email","cutoff"}`; the gateway must refuse every issuer's token carrying that (forwarded, lowercased)
// email with iat ≤ cut-off. Written here directly, as the IdP writes them, on the suite's Redis with random
// emails. Also: a jti revoked in lower case reaches a token whose jti is upper case.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { denyEmailKey, denyJtiKey, REVOCATION_CHANNEL } from '../../lib/revocation.ts';
import {
  type EntraTenant,
  errorOf,
  type GatewayProcess,
  gatewayEnv,
  mailServiceToken,
  postMail as post,
  startEntra,
  startGatewayProcess,
  startUpstream,
  type Upstream,
} from '../gateway/helpers.ts';

const TENANT = '11111111-2222-3333-4444-555555555555';
const CLIENT_ID = '66666666-7777-4888-9999-000000000000';
const BASE = 'https://mcp.deny-email.test';
const APP_ID_URI = `${BASE}/mail/mcp`;
const SECRET = 'deny-email-test-mail-shared-secret-0123456789';

let redis: Redis;
let entra: EntraTenant;
let upstream: Upstream;
let gateway: GatewayProcess;
const late: GatewayProcess[] = [];

const env = () =>
  gatewayEnv(
    { base: BASE, services: { mail: upstream.url }, entra, redisUrl: inject('redisUrl') },
    { MAIL_MCP_SHARED_SECRET: SECRET },
  );

beforeAll(async () => {
  redis = new Redis(inject('redisUrl'));
  [entra, upstream] = await Promise.all([startEntra(TENANT, CLIENT_ID), startUpstream()]);
  gateway = await startGatewayProcess(env());
});

afterAll(async () => {
  await Promise.all([gateway, ...late].map((g) => g?.stop()));
  await Promise.all([entra?.close(), upstream?.close()]);
  await redis?.quit();
});

const now = () => Math.floor(Date.now() / 1000);

function hs256(email: string, iatOffset = -5, claims: Record<string, unknown> = {}) {
  return mailServiceToken(SECRET, APP_ID_URI, { email, iat: now() + iatOffset, ...claims });
}

function entraToken(claims: Record<string, unknown>, iatOffset = -5) {
  return entra.token({ jti: null, ...claims }, iatOffset);
}

async function expectRevoked(gw: GatewayProcess, t: string): Promise<void> {
  const r = await post(gw, t);
  expect(r.status).toBe(401);
  expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'token_revoked' });
}

/** What the IdP's revoke-user does for the email: the key (TTL 3600 s past the cut-off) and the message. */
async function denyEmail(email: string, cutoff: number, publish = true): Promise<void> {
  const m = redis.multi().set(denyEmailKey(email), String(cutoff), 'EX', cutoff + 3600 - now());
  if (publish) m.publish(REVOCATION_CHANNEL, JSON.stringify({ email, cutoff }));
  await m.exec();
}

describe('deny:email at the gateway, whatever the issuer', () => {
  it('an email cut-off published on the channel refuses HS256 and Entra tokens carrying it (iat ≤ cut-off)', async () => {
    const email = `revoked-${randomUUID()}@example.com`;
    // The tokens carry the address in another case; the gateway forwards (and compares) it lowercased.
    const service = await hs256(email.toUpperCase());
    const confirmed = await entraToken({ email, preferred_username: email.toUpperCase() });
    const upn = await entraToken({ upn: email.toUpperCase() });
    for (const t of [service, confirmed, upn]) expect((await post(gateway, t)).status).toBe(200);

    await denyEmail(email, now());
    await expect.poll(async () => (await post(gateway, service)).status).toBe(401);
    for (const t of [service, confirmed, upn]) await expectRevoked(gateway, t);

    // Tokens issued after the cut-off (the user signed in again, allowed back) pass.
    const later = await hs256(email, 5);
    expect((await post(gateway, later)).status).toBe(200);
  });

  it('a key already in Redis is honoured by a gateway started afterwards (no message needed)', async () => {
    const email = `revoked-${randomUUID()}@example.com`;
    await denyEmail(email, now(), false);
    const started = await startGatewayProcess(env());
    late.push(started);
    await expectRevoked(started, await hs256(email));
    await expectRevoked(started, await entraToken({ preferred_username: email }));
    // Another user is untouched.
    expect((await post(started, await hs256(`other-${randomUUID()}@example.com`))).status).toBe(200);
  });

  it("an Entra token's unconfirmed email claim neither triggers nor escapes the cut-off: the forwarded email decides", async () => {
    const victim = `victim-${randomUUID()}@example.com`;
    const user = `user-${randomUUID()}@example.com`;
    await denyEmail(victim, now());
    // Claims the victim's address without confirmation: forwarded as preferred_username, so not refused.
    const claimsVictim = await entraToken({ email: victim, preferred_username: user });
    expect((await post(gateway, claimsVictim)).status).toBe(200);
    expect(upstream.requests.at(-1)!.headers['x-platform-user-email']).toBe(user);
    // The revoked user hides behind another unconfirmed email: still refused by preferred_username.
    await expectRevoked(gateway, await entraToken({ email: user, preferred_username: victim }));
  });

  it('a jti denylisted in lower case refuses a token whose jti is upper case', async () => {
    const jti = randomUUID().toUpperCase();
    const t = await hs256(`jti-${randomUUID()}@example.com`, -5, { jti });
    expect((await post(gateway, t)).status).toBe(200);
    await redis
      .multi()
      .set(denyJtiKey(jti.toLowerCase()), '1', 'EX', 600)
      .publish(REVOCATION_CHANNEL, JSON.stringify({ jti: jti.toLowerCase() }))
      .exec();
    await expect.poll(async () => (await post(gateway, t)).status).toBe(401);
    await expectRevoked(gateway, t);
  });
});
