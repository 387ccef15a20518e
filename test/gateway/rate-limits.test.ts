// The policy file's `limits:` in two real `platform gateway` replicas on one Redis, in front of a recording
// upstream: a limit per email and per client, for a service and for one tool, counted across both replicas; beyond
// it 429 RATE_LIMITED with Retry-After and the IETF RateLimit-Policy / RateLimit headers, and the upstream never
// sees the request; other callers go on; SIGHUP reloads the limits. Then Redis (a throwaway one) goes away:
// traffic goes on, counted per replica.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startThrowawayRedis, type ThrowawayRedis } from '../helpers/throwaway-redis.ts';
import {
  call,
  errorOf,
  type GatewayProcess,
  type GatewayResponse,
  type GatewayStack,
  platformToken,
  startGatewayStack,
} from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'gateway-limits-'));
const policyFile = join(dir, 'policy.yaml');
const ALLOW_ALL = 'rules:\n  - effect: allow\n';

let stack: GatewayStack;
let a: GatewayProcess;
let b: GatewayProcess;

const callTool = (tool: string) =>
  JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: {} } });
const LIST = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';

function post(gw: GatewayProcess, token: string, body = LIST): Promise<GatewayResponse> {
  return call(`${gw.url}/mail/mcp`, { method: 'POST', token, body });
}

/** Requests that reached the upstream with this caller's email (the signed identity header). */
function reached(email: string): number {
  return stack.upstream.requests.filter((r) => r.headers['x-platform-user-email'] === email).length;
}

function expectLimited(r: GatewayResponse, policy: string, quota: number, window: number): void {
  expect(r.status).toBe(429);
  expect(errorOf(r).code).toBe('RATE_LIMITED');
  expect(errorOf(r).reason).toBe('rate_limited');
  const retry = Number(r.headers['retry-after']);
  expect(retry).toBeGreaterThanOrEqual(1);
  expect(retry).toBeLessThanOrEqual(window);
  expect(r.headers['ratelimit-policy']).toBe(`"${policy}";q=${quota};w=${window}`);
  expect(r.headers.ratelimit).toBe(`"${policy}";r=0;t=${retry}`);
}

const user = () => ({ email: `u-${randomUUID().slice(0, 8)}@example.com`, client: `c-${randomUUID()}` });
const token = (u: { email: string; client: string }) =>
  platformToken(stack.ks, { email: u.email, client_id: u.client });

beforeAll(async () => {
  writeFileSync(
    policyFile,
    `${ALLOW_ALL}limits:
  - service: mail
    per: email
    rate: 3/60
  - tool: send_mail
    per: client
    rate: 2/60
`,
  );
  stack = await startGatewayStack(inject('redisUrl'));
  [a, b] = await Promise.all([
    stack.gateway({ GATEWAY_POLICY_FILE: policyFile }),
    stack.gateway({ GATEWAY_POLICY_FILE: policyFile }),
  ]);
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('gateway rate limits', () => {
  it('counts per email across both replicas, refuses beyond the limit without contacting the upstream', async () => {
    const alice = user();
    const t = await token(alice);
    // Alternating replicas: the third request is the last one the limit lets through, whichever replica gets it.
    expect((await post(a, t)).status).toBe(200);
    expect((await post(b, t)).status).toBe(200);
    expect((await post(a, t)).status).toBe(200);
    expectLimited(await post(b, t), 'limit-1', 3, 60);
    expectLimited(await post(a, t), 'limit-1', 3, 60);
    expect(reached(alice.email)).toBe(3);
    // A new token of the same email is the same caller.
    expectLimited(await post(b, await token(alice)), 'limit-1', 3, 60);
    // Someone else is not affected.
    const bob = user();
    expect((await post(a, await token(bob))).status).toBe(200);
    expect(reached(bob.email)).toBe(1);
  });

  it('counts a tool limit per client, only for tools/call of that tool', async () => {
    const client = `c-${randomUUID()}`;
    const one = { email: `one-${randomUUID().slice(0, 8)}@example.com`, client };
    const two = { email: `two-${randomUUID().slice(0, 8)}@example.com`, client };
    const [t1, t2] = await Promise.all([token(one), token(two)]);
    expect((await post(a, t1, callTool('send_mail'))).status).toBe(200);
    // Another tool of the same client is not counted against send_mail's limit.
    expect((await post(b, t2, callTool('list_messages'))).status).toBe(200);
    // Two users of one client share the client's count.
    expect((await post(b, t2, callTool('send_mail'))).status).toBe(200);
    expectLimited(await post(a, t1, callTool('send_mail')), 'limit-2', 2, 60);
    expectLimited(await post(b, t2, callTool('send_mail')), 'limit-2', 2, 60);
    expect(reached(one.email) + reached(two.email)).toBe(3);
    // Another client's users call it freely.
    const other = user();
    expect((await post(a, await token(other), callTool('send_mail'))).status).toBe(200);
  });

  it('takes new limits on SIGHUP', async () => {
    const carol = user();
    const t = await token(carol);
    for (let i = 0; i < 3; i++) expect((await post(i % 2 ? a : b, t)).status).toBe(200);
    expectLimited(await post(a, t), 'limit-1', 3, 60);
    writeFileSync(policyFile, `${ALLOW_ALL}limits:\n  - service: mail\n    per: email\n    rate: 5/30\n`);
    const reloaded = [a, b].map((g) => g.waitFor(/policy reloaded/));
    a.child.kill('SIGHUP');
    b.child.kill('SIGHUP');
    await Promise.all(reloaded);
    // A changed limit counts afresh, with its own quota and window.
    for (let i = 0; i < 5; i++) expect((await post(i % 2 ? a : b, t)).status).toBe(200);
    expectLimited(await post(b, t), 'limit-1', 5, 30);
    expect(reached(carol.email)).toBe(8);
  });
});

describe('gateway rate limits while Redis is away', () => {
  let redis: ThrowawayRedis;
  let own: GatewayStack;
  let x: GatewayProcess;
  let y: GatewayProcess;
  const file = join(dir, 'outage.yaml');

  beforeAll(async () => {
    writeFileSync(file, `${ALLOW_ALL}limits:\n  - per: email\n    rate: 2/60\n`);
    redis = await startThrowawayRedis();
    own = await startGatewayStack(redis.url);
    [x, y] = await Promise.all([
      own.gateway({ GATEWAY_POLICY_FILE: file }),
      own.gateway({ GATEWAY_POLICY_FILE: file }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await own?.stop();
    await redis?.stop();
  });

  it('goes on serving and counts per replica', async () => {
    const t = await platformToken(own.ks, { email: `d-${randomUUID().slice(0, 8)}@example.com` });
    await redis.stop();
    await Promise.all([x.waitFor(/redis unavailable/), y.waitFor(/redis unavailable/)]);
    // Each replica lets the limit through on its own, then refuses.
    for (const g of [x, y]) {
      expect((await call(`${g.url}/mail/mcp`, { method: 'POST', token: t })).status).toBe(200);
      expect((await call(`${g.url}/mail/mcp`, { method: 'POST', token: t })).status).toBe(200);
      const r = await call(`${g.url}/mail/mcp`, { method: 'POST', token: t });
      expect(r.status).toBe(429);
      expect(errorOf(r).code).toBe('RATE_LIMITED');
    }
  });
});
