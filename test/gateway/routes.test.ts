// The route table as data (gateway/routes.ts): what each path and method reaches, compiled for two services.
// The behaviour behind each route is tested through real processes elsewhere (validation, proxy, bodies).
import { describe, expect, it } from 'vitest';
import { compileRoutes, GATEWAY_ROUTES, type RouteSpec } from '../../gateway/routes.ts';

const table = compileRoutes(
  GATEWAY_ROUTES,
  new Map([
    ['mail', 'mail-context'],
    ['deals', 'deals-context'],
  ]),
);

function route(method: string, path: string) {
  const r = table.match(method, path);
  if (!r) return 'not found';
  const { access, handler } = r.spec;
  return {
    access,
    handler,
    service: r.service,
    prefix: r.prefix,
    accepts: r.accepts(method),
    allow: r.allow,
  };
}

describe('the gateway route table', () => {
  it('routes each documented path', () => {
    expect(route('GET', '/health')).toMatchObject({
      access: 'public',
      handler: 'health',
      service: undefined,
    });
    expect(route('HEAD', '/mail/.well-known/oauth-protected-resource')).toMatchObject({
      access: 'public',
      handler: 'metadata',
      service: 'mail-context',
    });
    for (const p of [
      '/.well-known/oauth-protected-resource/deals',
      '/.well-known/oauth-protected-resource/deals/mcp',
    ])
      expect(route('GET', p)).toMatchObject({ handler: 'metadata', service: 'deals-context', accepts: true });
    expect(route('GET', '/deals/health')).toMatchObject({ access: 'public', handler: 'serviceHealth' });
    for (const [m, p] of [
      ['POST', '/mail/mcp'],
      ['GET', '/mail/mcp'],
      ['DELETE', '/mail/mcp'],
      ['PATCH', '/mail'],
      ['GET', '/mail/a/b/c'],
    ])
      expect(route(m!, p!)).toMatchObject({ access: 'protected', handler: 'proxy', service: 'mail-context' });
  });

  it('a method an exact path does not take falls through to the service prefix, else it is a 405', () => {
    expect(route('POST', '/mail/health')).toMatchObject({
      access: 'protected',
      handler: 'proxy',
      prefix: true,
    });
    expect(route('POST', '/mail/.well-known/oauth-protected-resource')).toMatchObject({ handler: 'proxy' });
    expect(route('POST', '/health')).toMatchObject({ handler: 'health', accepts: false, allow: 'GET, HEAD' });
    expect(route('DELETE', '/.well-known/oauth-protected-resource/mail')).toMatchObject({
      handler: 'metadata',
      accepts: false,
    });
  });

  it('has no route for unknown services or other paths', () => {
    for (const p of [
      '/',
      '/calendar/mcp',
      '/.well-known/oauth-protected-resource/calendar',
      '/healthz',
      '/mailx/mcp',
    ])
      expect(route('GET', p), p).toBe('not found');
  });

  it('refuses a table that routes one path twice or uses * elsewhere', () => {
    const twice: RouteSpec[] = [
      { methods: '*', path: '/:service/x', access: 'protected', handler: 'proxy' },
      { methods: ['GET'], path: '/mail/x', access: 'public', handler: 'health' },
    ];
    expect(() => compileRoutes(twice, new Map([['mail', 1]]))).toThrow(/already routed/);
    const star: RouteSpec[] = [{ methods: '*', path: '/x/*', access: 'protected', handler: 'proxy' }];
    expect(() => compileRoutes(star, new Map())).toThrow(/only \/:service\/\*/);
  });
});
