// Issue 20 at the gateway: a stolen DPoP-bound access token is useless without the key. Two real
// `platform gateway` replicas share Redis (the proof replay cache); the token is minted by a stand-in platform
// issuer with `cnf.jkt`, as the IdP issues it.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  call,
  type DpopKey,
  dpopProof,
  errorOf,
  type GatewayProcess,
  type GatewayStack,
  newDpopKey,
  platformToken,
  postMail,
  postMailDpop,
  startGatewayStack,
} from '../gateway/helpers.ts';

const HTU = 'https://mcp.example.test/mail/mcp';

let stack: GatewayStack;
let gw1: GatewayProcess;
let gw2: GatewayProcess;
let holder: DpopKey;
let thief: DpopKey;
let token: string;

beforeAll(async () => {
  stack = await startGatewayStack(inject('redisUrl'));
  [gw1, gw2, holder, thief] = await Promise.all([
    stack.gateway(),
    stack.gateway(),
    newDpopKey(),
    newDpopKey(),
  ]);
  token = await platformToken(stack.ks, { email: 'alice@example.test', cnf: { jkt: holder.jkt } });
});
afterAll(() => stack.stop());

const refusedAsProof = (r: Awaited<ReturnType<typeof postMail>>, message: RegExp) => {
  expect(r.status).toBe(401);
  expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'invalid_dpop_proof' });
  expect(errorOf(r).message).toMatch(message);
  expect(r.headers['www-authenticate']).toContain('DPoP algs="ES256');
  expect(r.headers['www-authenticate']).toContain('error="invalid_dpop_proof"');
};

describe('a stolen DPoP-bound access token at the gateway', () => {
  it('the holder, with a fresh proof by its key, gets through (on either replica)', async () => {
    for (const gw of [gw1, gw2]) {
      const r = await postMailDpop(gw, token, await dpopProof(holder, { htm: 'POST', htu: HTU, token }));
      expect(r.status).toBe(200);
    }
  });

  it('replayed as Bearer: 401 INVALID_TOKEN dpop_required', async () => {
    const r = await postMail(gw1, token);
    expect(r.status).toBe(401);
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'dpop_required' });
    expect(r.headers['www-authenticate']).toContain('DPoP algs=');
  });

  it('as DPoP with a proof by another key: refused', async () => {
    const r = await postMailDpop(gw1, token, await dpopProof(thief, { htm: 'POST', htu: HTU, token }));
    refusedAsProof(r, /bound/);
  });

  it('as DPoP without any proof: refused', async () => {
    refusedAsProof(await postMailDpop(gw1, token, undefined), /no DPoP proof/);
  });

  it('with a proof for another URL or another method: refused', async () => {
    const otherUrl = await dpopProof(holder, {
      htm: 'POST',
      htu: 'https://mcp.example.test/deals/mcp',
      token,
    });
    refusedAsProof(await postMailDpop(gw1, token, otherUrl), /htu/);
    const otherMethod = await dpopProof(holder, { htm: 'GET', htu: HTU, token });
    refusedAsProof(await postMailDpop(gw1, token, otherMethod), /htm/);
  });

  it('with a proof for another access token (ath): refused', async () => {
    const proof = await dpopProof(holder, { htm: 'POST', htu: HTU, token: `${token}x` });
    refusedAsProof(await postMailDpop(gw1, token, proof), /ath/);
  });

  it('with a captured proof, reused on the same replica or on the second one: refused', async () => {
    const proof = await dpopProof(holder, { htm: 'POST', htu: HTU, token });
    expect((await postMailDpop(gw1, token, proof)).status).toBe(200);
    refusedAsProof(await postMailDpop(gw1, token, proof), /used before/);
    refusedAsProof(await postMailDpop(gw2, token, proof), /used before/);
  });

  it('with a proof older than the 60 s window: refused', async () => {
    const proof = await dpopProof(holder, { htm: 'POST', htu: HTU, token, iat: -120 });
    refusedAsProof(await postMailDpop(gw2, token, proof), /old/);
  });

  it('a proof refused by a local check never uses up its jti (the replay cache is asked last)', async () => {
    // The same jti first on a request for another method (refused before Redis), then legitimately.
    const claims = { jti: `j-${Date.now()}` };
    const wrong = await dpopProof(holder, { htm: 'GET', htu: HTU, token, claims });
    refusedAsProof(await postMailDpop(gw1, token, wrong), /htm/);
    const right = await dpopProof(holder, { htm: 'POST', htu: HTU, token, claims });
    expect((await postMailDpop(gw1, token, right)).status).toBe(200);
  });

  it('an unbound Bearer token keeps working, a stray DPoP header ignored', async () => {
    const plain = await platformToken(stack.ks, { email: 'alice@example.test' });
    expect((await postMail(gw1, plain)).status).toBe(200);
    const r = await call(`${gw1.url}/mail/mcp`, {
      method: 'POST',
      token: plain,
      headers: { dpop: await dpopProof(thief, { htm: 'POST', htu: HTU }) },
    });
    expect(r.status).toBe(200);
  });
});
