// loadGatewayConfig: every variable checked at start-up, a bad value named in one line, documented defaults.
import { describe, expect, it } from 'vitest';
import { loadGatewayConfig } from '../../gateway/config.ts';
import { ConfigError } from '../../lib/config.ts';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { startPlatform } from '../helpers/processes.ts';

const base = {
  PUBLIC_BASE_URL: 'https://mcp.example.com',
  GATEWAY_SERVICES: 'deals,mail-box',
  DEALS_MCP_UPSTREAM: 'http://deals:3000',
  MAIL_BOX_MCP_UPSTREAM: 'http://mail:3000/base/',
  GATEWAY_IDENTITY_SECRET: 's'.repeat(32),
  REDIS_URL: 'redis://127.0.0.1:6379',
};

function failure(env: Record<string, string | undefined>, opts?: { redisRequired?: boolean }): ConfigError {
  try {
    loadGatewayConfig(env, opts);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('defaults', () => {
  it('derives app id URIs, metadata URLs, hosts and origins from PUBLIC_BASE_URL; trust paths off', () => {
    const c = loadGatewayConfig(base);
    expect(c.port).toBe(8080);
    expect(c.revocationMode).toBe('fail-open');
    expect(c.maxBodyBytes).toBe(1024 * 1024);
    expect(c.bodyTimeoutMs).toBe(10_000);
    expect(c.platform).toBeUndefined();
    expect(c.entra).toBeUndefined();
    const [deals, mail] = c.services;
    expect(deals).toMatchObject({
      name: 'deals',
      upstreamOrigins: ['http://deals:3000'],
      upstreamBasePath: '',
      appIdUri: 'https://mcp.example.com/deals/mcp',
      resourceMetadataUrl: 'https://mcp.example.com/deals/.well-known/oauth-protected-resource',
      platformScope: 'mcp:deals',
      entraClientId: undefined,
      sharedSecret: undefined,
    });
    expect(deals!.allowedHosts).toEqual([
      { host: 'localhost', port: undefined, exact: true },
      { host: '127.0.0.1', port: undefined, exact: true },
      { host: 'mcp.example.com', port: '', exact: true },
    ]);
    expect([...deals!.allowedOrigins]).toEqual(['https://mcp.example.com']);
    // Each service signs with its own key, derived from the one secret (lib/identity.ts).
    expect(deals!.identityKey).toBe(deriveIdentityKey('s'.repeat(32), 'deals'));
    expect(mail!.identityKey).toBe(deriveIdentityKey('s'.repeat(32), 'mail-box'));
    // A service name with a dash reads MAIL_BOX_*; a base path on the upstream is kept.
    expect(mail).toMatchObject({ name: 'mail-box', upstreamBasePath: '/base' });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(deals)).toBe(true);
  });

  it('Entra issuers and key sets derive from IDP_TENANT_ID; ENTRA_JWKS_URL overrides both key sets', () => {
    const tid = '11111111-2222-3333-4444-555555555555';
    const c = loadGatewayConfig({
      ...base,
      IDP_TENANT_ID: tid,
      DEALS_MCP_CLIENT_ID: 'AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE',
    });
    expect(c.entra).toEqual({
      tenantId: tid,
      v2Issuer: `https://login.microsoftonline.com/${tid}/v2.0`,
      v1Issuer: `https://sts.windows.net/${tid}/`,
      v2JwksUrl: `https://login.microsoftonline.com/${tid}/discovery/v2.0/keys`,
      v1JwksUrl: `https://login.microsoftonline.com/${tid}/discovery/keys`,
    });
    expect(c.services[0]!.entraClientId).toBe('aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee');
    const o = loadGatewayConfig({ ...base, IDP_TENANT_ID: tid, ENTRA_JWKS_URL: 'http://127.0.0.1:9/keys' });
    expect([o.entra!.v1JwksUrl, o.entra!.v2JwksUrl]).toEqual([
      'http://127.0.0.1:9/keys',
      'http://127.0.0.1:9/keys',
    ]);
  });

  it('`platform dev` may omit REDIS_URL', () => {
    const { REDIS_URL: _, ...noRedis } = base;
    expect(loadGatewayConfig(noRedis, { redisRequired: false }).redisUrl).toBeUndefined();
  });
});

/** A service with an upstream connection, and what it needs. */
const CONNECTED = {
  DEALS_UPSTREAM_CONNECTION: 'github',
  PLATFORM_ISSUER: 'https://idp.example.com',
  PLATFORM_AUDIENCE: 'https://idp.example.com/api',
  GATEWAY_CLIENT_SECRET: 'c'.repeat(32),
};

describe('services with an upstream connection', () => {
  it("read the connection and kind; the exchange defaults to the issuer's token endpoint as platform-gateway", () => {
    const c = loadGatewayConfig({
      ...base,
      ...CONNECTED,
      MAIL_BOX_UPSTREAM_KIND: 'remote',
      MAIL_BOX_MCP_UPSTREAM: 'https://mcp.example.org/mcp/',
    });
    expect(c.services[0]).toMatchObject({
      upstreamConnection: 'github',
      upstreamKind: 'tool',
      remoteEndpoint: undefined,
    });
    expect(c.services[1]).toMatchObject({
      upstreamConnection: undefined,
      upstreamKind: 'remote',
      remoteEndpoint: '/mcp/',
    });
    expect(c.exchange).toEqual({
      tokenUrl: 'https://idp.example.com/oauth/token',
      clientId: 'platform-gateway',
      clientSecret: 'c'.repeat(32),
    });
    expect(
      loadGatewayConfig({ ...base, ...CONNECTED, GATEWAY_TOKEN_URL: 'http://idp:3000/oauth/token' }).exchange
        ?.tokenUrl,
    ).toBe('http://idp:3000/oauth/token');
    // No connection anywhere: no exchange, whatever else is set.
    expect(loadGatewayConfig({ ...base, GATEWAY_CLIENT_SECRET: 'c'.repeat(32) }).exchange).toBeUndefined();
  });
});

describe('bad values stop start-up with the variable named', () => {
  const cases: Array<[string, Record<string, string | undefined>, RegExp]> = [
    ['PUBLIC_BASE_URL', { PUBLIC_BASE_URL: undefined }, /is required/],
    ['PUBLIC_BASE_URL', { PUBLIC_BASE_URL: 'ftp://x' }, /http/],
    ['GATEWAY_SERVICES', { GATEWAY_SERVICES: '' }, /is required/],
    ['GATEWAY_SERVICES', { GATEWAY_SERVICES: 'Deals' }, /not a service name/],
    ['GATEWAY_SERVICES', { GATEWAY_SERVICES: 'deals,deals', DEALS_MCP_UPSTREAM: 'http://d' }, /twice/],
    ['GATEWAY_SERVICES', { GATEWAY_SERVICES: 'health' }, /reserved/],
    ['DEALS_MCP_UPSTREAM', { DEALS_MCP_UPSTREAM: undefined }, /is required/],
    ['DEALS_MCP_UPSTREAM', { DEALS_MCP_UPSTREAM: 'deals:3000' }, /URL/],
    ['DEALS_MCP_CLIENT_ID', { IDP_TENANT_ID: 'contoso.example', DEALS_MCP_CLIENT_ID: 'not-a-guid' }, /GUID/],
    ['DEALS_MCP_CLIENT_ID', { DEALS_MCP_CLIENT_ID: '11111111-2222-3333-4444-555555555555' }, /IDP_TENANT_ID/],
    ['DEALS_MCP_SHARED_SECRET', { DEALS_MCP_SHARED_SECRET: 'short' }, /32 bytes/],
    ['DEALS_MCP_ALLOWED_HOSTS', { DEALS_MCP_ALLOWED_HOSTS: 'a b' }, /host pattern/],
    ['DEALS_MCP_ALLOWED_ORIGINS', { DEALS_MCP_ALLOWED_ORIGINS: 'https://x.example/path' }, /origin/],
    ['PLATFORM_AUDIENCE', { PLATFORM_ISSUER: 'https://idp.example' }, /is required/],
    ['PLATFORM_ISSUER', { PLATFORM_AUDIENCE: 'aud' }, /is required/],
    ['ENTRA_JWKS_URL', { ENTRA_JWKS_URL: 'https://keys.example' }, /IDP_TENANT_ID/],
    ['REDIS_URL', { REDIS_URL: undefined }, /is required/],
    ['REDIS_URL', { REDIS_URL: 'http://redis' }, /redis:\/\//],
    ['GATEWAY_IDENTITY_SECRET', { GATEWAY_IDENTITY_SECRET: undefined }, /is required/],
    ['GATEWAY_IDENTITY_SECRET', { GATEWAY_IDENTITY_SECRET: 'x'.repeat(31) }, /at least 32 characters/],
    ['GATEWAY_PORT', { GATEWAY_PORT: 'eighty' }, /port/],
    ['GATEWAY_REVOCATION_MODE', { GATEWAY_REVOCATION_MODE: 'fail-soft' }, /fail-open, fail-closed/],
    ['GATEWAY_JWKS_COOLDOWN_SECONDS', { GATEWAY_JWKS_COOLDOWN_SECONDS: '-1' }, /number/],
    ['GATEWAY_TOKEN_CACHE_SIZE', { GATEWAY_TOKEN_CACHE_SIZE: '1.5' }, /whole number/],
    ['GATEWAY_MAX_BODY_BYTES', { GATEWAY_MAX_BODY_BYTES: '10' }, /between/],
    ['GATEWAY_BODY_TIMEOUT_MS', { GATEWAY_BODY_TIMEOUT_MS: '10s' }, /number/],
    ['GATEWAY_BODY_TIMEOUT_MS', { GATEWAY_BODY_TIMEOUT_MS: '50' }, /between/],
    ['DEALS_UPSTREAM_CONNECTION', { DEALS_UPSTREAM_CONNECTION: 'GitHub' }, /connection name/],
    ['DEALS_UPSTREAM_KIND', { DEALS_UPSTREAM_KIND: 'third-party' }, /tool, remote/],
    ['PLATFORM_ISSUER', { DEALS_UPSTREAM_CONNECTION: 'github' }, /only platform tokens are exchanged/],
    [
      'GATEWAY_CLIENT_SECRET',
      { ...CONNECTED, GATEWAY_CLIENT_SECRET: undefined },
      /is required when DEALS_UPSTREAM_CONNECTION/,
    ],
    ['GATEWAY_CLIENT_SECRET', { ...CONNECTED, GATEWAY_CLIENT_SECRET: 'x'.repeat(31) }, /at least 32/],
    ['GATEWAY_TOKEN_URL', { ...CONNECTED, GATEWAY_TOKEN_URL: 'idp:3000/oauth/token' }, /URL/],
  ];
  it.each(cases)('%s %j', (variable, change, problem) => {
    const err = failure({ ...base, ...change });
    expect(err.variable).toBe(variable);
    expect(err.message).toMatch(problem);
  });

  it('the process prints one line naming the variable and exits before listening', async () => {
    const p = startPlatform(['gateway'], { ...base, GATEWAY_REVOCATION_MODE: 'sometimes' });
    expect(await p.exited).toBe(2);
    expect(p.output().trim()).toBe(
      'platform: configuration error: GATEWAY_REVOCATION_MODE: must be one of fail-open, fail-closed, got "sometimes"',
    );
  });
});
