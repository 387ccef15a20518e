// CORS (issue 18): the endpoints browser clients call across origins (the MCP Inspector:
// https://github.com/modelcontextprotocol/inspector/issues/817) answer any origin without credentials; the
// authorize, consent, device-verification and admin routes never send CORS headers (a page of another origin
// must never read them). Against a real IdP and gateway.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type SecurityStack, startSecurityStack } from '../helpers/security-stack.ts';

const ORIGIN = 'http://localhost:6274';
let stack: SecurityStack;

beforeAll(async () => {
  stack = await startSecurityStack({ redisUrl: inject('redisUrl') });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

async function preflight(url: string, method: string) {
  return fetch(url, {
    method: 'OPTIONS',
    headers: {
      origin: ORIGIN,
      'access-control-request-method': method,
      'access-control-request-headers': 'content-type, authorization',
    },
  });
}

function expectCors(res: Response) {
  expect(res.headers.get('access-control-allow-origin')).toBe('*');
  expect(res.headers.get('access-control-allow-credentials')).toBeNull();
}

describe('the IdP', () => {
  const CORS: Array<[string, string, RequestInit]> = [
    ['/.well-known/openid-configuration', 'GET', {}],
    ['/.well-known/oauth-authorization-server', 'GET', {}],
    ['/.well-known/jwks.json', 'GET', {}],
    ['/oauth/register', 'POST', { headers: { 'content-type': 'application/json' }, body: '{}' }],
    ['/oauth/token', 'POST', { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' }],
    ['/oauth/revoke', 'POST', { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' }],
    ['/oauth/userinfo', 'GET', {}],
    [
      '/oauth/device_authorization',
      'POST',
      { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' },
    ],
  ];
  for (const [path, method, init] of CORS) {
    it(`${path}: preflight 204 and the actual answer (even an error) carry Allow-Origin *, no credentials`, async () => {
      const pre = await preflight(`${stack.idp.url}${path}`, method);
      expect(pre.status).toBe(204);
      expectCors(pre);
      expect(pre.headers.get('access-control-allow-methods')).toContain(method);
      expect(pre.headers.get('access-control-allow-headers')).toContain('authorization');
      const res = await fetch(`${stack.idp.url}${path}`, {
        method,
        ...init,
        headers: { ...(init.headers as Record<string, string>), origin: ORIGIN },
      });
      await res.text();
      expectCors(res);
    });
  }

  for (const path of ['/oauth/authorize', '/oauth/device', '/admin', '/admin/api/users', '/health']) {
    it(`${path}: no CORS header, for a preflight or a request`, async () => {
      const pre = await preflight(`${stack.idp.url}${path}`, 'POST');
      await pre.text();
      expect(pre.headers.get('access-control-allow-origin')).toBeNull();
      expect(pre.status).not.toBe(204);
      const res = await fetch(`${stack.idp.url}${path}`, { headers: { origin: ORIGIN }, redirect: 'manual' });
      await res.text();
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
    });
  }
});

describe('the gateway', () => {
  it('the protected-resource metadata answers a preflight and a read from any origin', async () => {
    for (const path of [
      '/mail/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/mail/mcp',
    ]) {
      const pre = await preflight(`${stack.gateway.url}${path}`, 'GET');
      expect(pre.status).toBe(204);
      expectCors(pre);
      const res = await fetch(`${stack.gateway.url}${path}`, { headers: { origin: ORIGIN } });
      expect(res.status).toBe(200);
      expectCors(res);
    }
  });

  it('a 401 exposes WWW-Authenticate and DPoP-Nonce to any origin', async () => {
    const res = await fetch(`${stack.gateway.url}/mail/mcp`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(401);
    expectCors(res);
    expect(res.headers.get('access-control-expose-headers')).toBe('WWW-Authenticate, DPoP-Nonce');
    expect(res.headers.get('www-authenticate')).toContain('resource_metadata=');
    expect(res.headers.get('www-authenticate')).toContain('DPoP algs=');
  });
});
