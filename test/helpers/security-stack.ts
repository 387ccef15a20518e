// A real IdP and a real gateway in front of one upstream (the `mail` service), on a test database and a Redis:
// what the revocation, entitlement and block tests drive. The IdP's token limit is raised so that refresh loops
// measure the rules, not the rate limiter.
import { decodeJwt } from 'jose';
import { expect } from 'vitest';
import {
  call,
  errorOf,
  type GatewayProcess,
  type GatewayResponse,
  startGatewayProcess,
  startUpstream,
  type Upstream,
} from '../gateway/helpers.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from './database.ts';
import { refresh, signIn } from './oauth.ts';
import { type IdpProcess, startIdpProcess } from './processes.ts';

export interface SecurityStack {
  db: TestDatabase;
  idp: IdpProcess;
  gateway: GatewayProcess;
  upstream: Upstream;
  admin: SeededUser;
  /** An admin API call with the admin's token; the JSON answer and status. */
  adminApi(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
    // biome-ignore lint/suspicious/noExplicitAny: answers are asserted structurally by the tests
  ): Promise<{ status: number; json: any }>;
  /** A tool call through the gateway with this bearer. */
  viaGateway(accessToken: string): Promise<GatewayResponse>;
  /** Starts another gateway on the same Redis (stopped with the stack). */
  anotherGateway(redisUrl?: string): Promise<GatewayProcess>;
  stop(): Promise<void>;
}

export async function startSecurityStack(o: {
  redisUrl: string;
  env?: Record<string, string>;
}): Promise<SecurityStack> {
  const db = await createTestDatabase();
  const admin = await seedUser(db.pool);
  const [idp, upstream] = await Promise.all([
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl: o.redisUrl,
      env: {
        PLATFORM_ADMIN_EMAILS: admin.email,
        PLATFORM_SERVICES: 'platform,mail,deals',
        PLATFORM_RATE_LIMITS: 'token=1000000/60,revoke=100000/60,device=100000/60',
        ...o.env,
      },
    }),
    startUpstream(),
  ]);
  const gateways: GatewayProcess[] = [];
  const startGateway = async (redisUrl = o.redisUrl) => {
    const g = await startGatewayProcess({
      PUBLIC_BASE_URL: 'https://mcp.security-stack.test',
      GATEWAY_SERVICES: 'mail',
      MAIL_MCP_UPSTREAM: upstream.url,
      PLATFORM_ISSUER: idp.issuer,
      PLATFORM_AUDIENCE: idp.audience,
      REDIS_URL: redisUrl,
    });
    gateways.push(g);
    return g;
  };
  const gateway = await startGateway();
  let adminToken: string | undefined;
  const token = async () => {
    adminToken ??= (await signIn(idp.issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
    return adminToken;
  };
  return {
    db,
    idp,
    gateway,
    upstream,
    admin,
    async adminApi(method, path, body) {
      const res = await fetch(`${idp.issuer}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${await token()}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : {} };
    },
    viaGateway: (t) => call(`${gateway.url}/mail/mcp`, { method: 'POST', token: t }),
    anotherGateway: startGateway,
    async stop() {
      await Promise.all(gateways.map((g) => g.stop()));
      await idp.stop();
      await upstream.close();
      await db.drop();
    },
  };
}

/** A new user granted each of `services` by email (a stack started with PLATFORM_ENTITLEMENTS=managed). */
export async function grantedUser(stack: SecurityStack, services: readonly string[]): Promise<SeededUser> {
  const u = await seedUser(stack.db.pool);
  for (const service of services)
    expect(
      (await stack.adminApi('POST', '/admin/api/entitlements', { service, email: u.email })).status,
    ).toBe(200);
  return u;
}

/** Withdraws `service` from the user's email (admin API). */
export async function ungrant(stack: SecurityStack, service: string, email: string): Promise<void> {
  const q = new URLSearchParams({ service, email });
  expect((await stack.adminApi('DELETE', `/admin/api/entitlements?${q}`)).status).toBe(200);
}

/** What a refresh loop obtained: every access token, and the refresh token it holds last. */
export interface Chain {
  accessTokens: string[];
  latest: string;
  refreshes: number;
  /** The answer that ended the loop (invalid_grant once revoked), if any. */
  ended?: string;
}

/**
 * Refreshes `chain` as fast as the IdP answers, until a refresh is refused or `until()` says stop: the holder of
 * a stolen sign-in, trying to outlive a revocation.
 */
export async function refreshLoop(issuer: string, chain: Chain, until: () => boolean): Promise<void> {
  while (!until()) {
    const r = await refresh(issuer, chain.latest);
    if (r.status !== 200) {
      chain.ended = String(r.json.error);
      return;
    }
    chain.refreshes++;
    chain.accessTokens.push(r.json.access_token as string);
    chain.latest = r.json.refresh_token as string;
  }
}

/**
 * Every token is refused: the latest refresh token of each chain gets invalid_grant (unless `refreshes` is
 * 'kept'), and every access token the chains obtained (those `only` selects) is refused by the gateway with 401
 * token_revoked (its mirror is given until `boundMs` to receive the revocation). Returns the survivors, one
 * line each (empty when the rule holds).
 */
export async function survivors(
  stack: SecurityStack,
  chains: readonly Chain[],
  opts: { refreshes?: 'refused' | 'kept'; only?: (accessToken: string) => boolean; boundMs?: number } = {},
): Promise<string[]> {
  const out: string[] = [];
  for (const [i, c] of chains.entries()) {
    if (opts.refreshes === 'kept') break;
    const r = await refresh(stack.idp.issuer, c.latest);
    if (r.status === 200 || r.json.error !== 'invalid_grant')
      out.push(`chain ${i}: refresh answered ${r.status} ${r.text.slice(0, 120)}`);
  }
  const tokens = chains.flatMap((c) => c.accessTokens).filter((t) => opts.only?.(t) ?? true);
  const deadline = Date.now() + (opts.boundMs ?? 1000);
  for (const t of tokens) {
    let res = await stack.viaGateway(t);
    while (res.status === 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      res = await stack.viaGateway(t);
    }
    if (res.status !== 401 || errorOf(res).reason !== 'token_revoked') {
      const c = decodeJwt(t);
      out.push(
        `access token iat ${c.iat} jti ${c.jti}: gateway answered ${res.status} ${errorOf(res).reason}`,
      );
    }
  }
  return out;
}
