// DPoP at a real `platform gateway` (docs/gateway.md § DPoP): the challenges, the nonce round trip
// (GATEWAY_DPOP_NONCE=on), what reaches the tool server, and the shapes of the refusals. The attacks are in
// test/security/dpop-gateway.test.ts.
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
  postMailDpop,
  startGatewayStack,
  verifyRecorded,
} from './helpers.ts';

const HTU = 'https://mcp.example.test/mail/mcp';
const EMAIL = 'bob@example.test';

let stack: GatewayStack;
let gw: GatewayProcess;
let withNonce: GatewayProcess;
let key: DpopKey;
let token: string;

beforeAll(async () => {
  stack = await startGatewayStack(inject('redisUrl'));
  [gw, withNonce, key] = await Promise.all([
    stack.gateway(),
    stack.gateway({ GATEWAY_DPOP_NONCE: 'on' }),
    newDpopKey(),
  ]);
  token = await platformToken(stack.ks, { email: EMAIL, cnf: { jkt: key.jkt } });
});
afterAll(() => stack.stop());

describe('DPoP at the gateway', () => {
  it('proxies a DPoP request with the identity of the token; neither Authorization nor DPoP reaches the tool server', async () => {
    const proof = await dpopProof(key, { htm: 'POST', htu: HTU, token });
    const r = await postMailDpop(gw, token, proof);
    expect(r.status).toBe(200);
    const seen = stack.upstream.requests.at(-1)!;
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers.dpop).toBeUndefined();
    expect(verifyRecorded(seen).email).toBe(EMAIL);
  });

  it('the query is not part of htu; the scheme is case-insensitive', async () => {
    const proof = await dpopProof(key, { htm: 'POST', htu: HTU, token });
    const r = await call(`${gw.url}/mail/mcp?x=1`, {
      method: 'POST',
      headers: { authorization: `dpop ${token}`, dpop: proof },
    });
    expect(r.status).toBe(200);
  });

  it('two DPoP headers: invalid_dpop_proof', async () => {
    const proofs = [
      await dpopProof(key, { htm: 'POST', htu: HTU, token }),
      await dpopProof(key, { htm: 'POST', htu: HTU, token }),
    ];
    const r = await call(`${gw.url}/mail/mcp`, {
      method: 'POST',
      headers: { authorization: `DPoP ${token}`, dpop: proofs },
    });
    expect(r.status).toBe(401);
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'invalid_dpop_proof' });
  });

  it('an unbound token under the DPoP scheme: token_not_bound', async () => {
    const plain = await platformToken(stack.ks, { email: EMAIL });
    const r = await postMailDpop(gw, plain, await dpopProof(key, { htm: 'POST', htu: HTU, token: plain }));
    expect(r.status).toBe(401);
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'token_not_bound' });
  });

  it('a cnf without a usable jkt is invalid_claim, never read as unbound', async () => {
    const odd = await platformToken(stack.ks, { email: EMAIL, cnf: { 'x5t#S256': 'abc' } });
    const r = await call(`${gw.url}/mail/mcp`, { method: 'POST', token: odd });
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'invalid_claim' });
  });

  it('a refused proof: the Bearer challenge, then the DPoP one with the error; CORS exposes both headers', async () => {
    const r = await postMailDpop(gw, token, 'not-a-proof');
    expect(r.status).toBe(401);
    const challenges = r.rawHeaders.filter((_, i, a) => i % 2 === 1 && /^www-authenticate$/i.test(a[i - 1]!));
    expect(challenges).toHaveLength(2);
    expect(challenges[0]).toBe(
      'Bearer resource_metadata="https://mcp.example.test/mail/.well-known/oauth-protected-resource"',
    );
    expect(challenges[1]).toMatch(
      /^DPoP algs="ES256 [^"]*EdDSA[^"]*", error="invalid_dpop_proof", error_description="[^"]+"$/,
    );
    expect(r.headers['access-control-expose-headers']).toBe('WWW-Authenticate, DPoP-Nonce');
  });

  it('GATEWAY_DPOP_NONCE=on: use_dpop_nonce with a DPoP-Nonce, and a proof carrying it passes', async () => {
    const first = await postMailDpop(
      withNonce,
      token,
      await dpopProof(key, { htm: 'POST', htu: HTU, token }),
    );
    expect(first.status).toBe(401);
    expect(errorOf(first)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'use_dpop_nonce' });
    expect(first.headers['www-authenticate']).toContain('error="use_dpop_nonce"');
    const nonce = first.headers['dpop-nonce'];
    expect(typeof nonce).toBe('string');
    const proof = await dpopProof(key, { htm: 'POST', htu: HTU, token, claims: { nonce } });
    expect((await postMailDpop(withNonce, token, proof)).status).toBe(200);
    const forged = await dpopProof(key, { htm: 'POST', htu: HTU, token, claims: { nonce: 'made-up' } });
    expect(errorOf(await postMailDpop(withNonce, token, forged)).reason).toBe('use_dpop_nonce');
  });
});
