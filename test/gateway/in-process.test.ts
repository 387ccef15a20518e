// `platform dev` runs the gateway inside one process with the IdP: startGateway with the in-process
// MemoryRevocations and no REDIS_URL at all. This is the signature that command is written against.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadGatewayConfig } from '../../gateway/config.ts';
import { type RunningGateway, startGateway } from '../../gateway/server.ts';
import { createLogger } from '../../lib/logger.ts';
import { MemoryRevocations } from '../../lib/revocation.ts';
import {
  AUDIENCE,
  call,
  errorOf,
  type GatewayStack,
  IDENTITY_SECRET,
  platformToken,
  startGatewayStack,
  type Upstream,
  verifyRecorded,
} from './helpers.ts';

let stack: GatewayStack;
let upstream: Upstream;
let gateway: RunningGateway;
const revocations = new MemoryRevocations();

beforeAll(async () => {
  // No Redis: the gateway runs in this process with MemoryRevocations.
  stack = await startGatewayStack();
  upstream = stack.upstream;
  const config = loadGatewayConfig(
    {
      PUBLIC_BASE_URL: 'http://localhost:8080',
      GATEWAY_SERVICES: 'platform',
      PLATFORM_MCP_UPSTREAM: upstream.url,
      // Discovery, as `platform dev` would configure it (issuer only).
      PLATFORM_ISSUER: stack.ks.issuer,
      PLATFORM_AUDIENCE: AUDIENCE,
      GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
      GATEWAY_PORT: '0',
    },
    { redisRequired: false },
  );
  gateway = await startGateway(config, {
    log: createLogger({ name: 'gateway', level: 'silent' }),
    revocations,
    host: '127.0.0.1',
  });
});

afterAll(async () => {
  await gateway?.close();
  await stack?.stop();
});

async function token(iat = 0, email = 'dev@example.com') {
  const jti = randomUUID();
  const sub = `dev-${randomUUID()}`;
  const t = await platformToken(stack.ks, { sub, email, scope: 'mcp:platform', jti }, { iat });
  return { t, jti, sub };
}

const post = (t: string) => call(`${gateway.url}/platform/mcp`, { method: 'POST', token: t });

describe('startGateway with an in-process revocation store (no Redis)', () => {
  it('verifies and proxies with signed identity', async () => {
    const { t, sub } = await token();
    expect((await post(t)).status).toBe(200);
    expect(verifyRecorded(upstream.requests.at(-1)!)).toMatchObject({
      sub,
      issuer: 'platform',
    });
  });

  it('a jti denied in the shared store is refused on the next request', async () => {
    const { t, jti } = await token();
    expect((await post(t)).status).toBe(200);
    await revocations.denyJti(jti, Math.floor(Date.now() / 1000) + 600);
    expect(errorOf(await post(t))).toMatchObject({ code: 'INVALID_TOKEN', reason: 'token_revoked' });
  });

  it('a subject cut-off refuses tokens issued at or before it', async () => {
    const { t, sub } = await token(-5);
    expect((await post(t)).status).toBe(200);
    await revocations.denySubject(sub, Math.floor(Date.now() / 1000));
    expect(errorOf(await post(t)).reason).toBe('token_revoked');
  });

  it('an email cut-off refuses tokens carrying that email (any case) issued at or before it', async () => {
    const email = `dev-${randomUUID()}@example.com`;
    const { t } = await token(-5, email.toUpperCase());
    expect((await post(t)).status).toBe(200);
    await revocations.denyEmail(email, Math.floor(Date.now() / 1000));
    expect(errorOf(await post(t)).reason).toBe('token_revoked');
    expect((await post((await token(5, email)).t)).status).toBe(200);
  });
});
