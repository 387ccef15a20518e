// The pure rules behind the tool servers, at their edges: thresholds, tolerances, versions, patterns, config.
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../lib/config.ts';
import { type HostPattern, parseHostPattern } from '../../lib/host-patterns.ts';
import { createLogger } from '../../lib/logger.ts';
import { loadToolConfig } from '../../tools/config.ts';
import {
  ArtifactDecodeError,
  CURRENT_SCHEMA_VERSION,
  decodeClosure,
} from '../../tools/deals/artifact-codec.ts';
import { roundTrip, withinTolerance } from '../../tools/deals/citations.ts';
import { findConflicts, relativeGap } from '../../tools/deals/conflicts.ts';
import { requestHash } from '../../tools/deals/idempotency.ts';
import { createHostGuard } from '../../tools/kit/host-guard.ts';
import { toolErrorResult } from '../../tools/kit/tool-errors.ts';
import { resolveSender, SendAsForbiddenError } from '../../tools/mail/send-as.ts';
import { identityFor } from './helpers.ts';

const m = (name: string, value: number, source_file = 'f', location = 'l') => ({
  name,
  value,
  source_file,
  location,
});

describe('conflict rule: relative gap above 10 %', () => {
  it('measures the gap against the larger magnitude', () => {
    expect(relativeGap(100, 110)).toBeCloseTo(10 / 110, 12);
    expect(relativeGap(0, 0)).toBe(0);
    expect(relativeGap(0, 5)).toBe(1);
    expect(relativeGap(-10, 10)).toBe(2);
  });

  it('flags only groups whose gap exceeds the threshold, keeping every value', () => {
    expect(findConflicts([m('a', 100), m('a', 111)])).toEqual([]); // 0.0991
    expect(findConflicts([m('a', 90), m('a', 100)])).toEqual([]); // exactly 0.1 is not above
    const [c] = findConflicts([
      m('a', 100, 'x', '1'),
      m('a', 112, 'y', '2'),
      m('a', 105, 'z', '3'),
      m('b', 1),
    ]);
    expect(c).toEqual({
      metric: 'a',
      min: 100,
      max: 112,
      relative_gap: 12 / 112,
      values: [
        { value: 100, source_file: 'x', location: '1' },
        { value: 112, source_file: 'y', location: '2' },
        { value: 105, source_file: 'z', location: '3' },
      ],
    });
  });
});

describe('citation round trip: ±0.001 %', () => {
  it('accepts differences up to 1e-5 relative and refuses beyond', () => {
    expect(withinTolerance(1_000_000, 1_000_010)).toBe(true);
    expect(withinTolerance(1_000_000, 1_000_011)).toBe(false);
    expect(withinTolerance(0, 0)).toBe(true);
    expect(withinTolerance(0, 1e-12)).toBe(false);
  });

  it('compares with the metric of the same name, and the same source file when the citation names one', () => {
    const metrics = [m('rev', 10, 'a.pdf'), m('rev', 20, 'b.pdf')];
    expect(roundTrip({ anchor_type: 'file_id', anchor: 'x', metric: 'rev', value: 20 }, metrics)).toEqual({
      outcome: 'reproduced',
      stored: 20,
    });
    expect(
      roundTrip(
        { anchor_type: 'file_id', anchor: 'x', metric: 'rev', value: 20, source_file: 'a.pdf' },
        metrics,
      ),
    ).toMatchObject({
      outcome: 'failed',
      stored: 10,
    });
    expect(roundTrip({ anchor_type: 'page', anchor: '3', metric: 'cost', value: 1 }, metrics)).toMatchObject({
      outcome: 'failed',
    });
    expect(roundTrip({ anchor_type: 'page', anchor: '3' }, metrics)).toEqual({ outcome: 'unchecked' });
  });
});

describe('artifact schema versions', () => {
  it('reads version 1 (text citations) and the current version into the current shape', () => {
    expect(CURRENT_SCHEMA_VERSION).toBe(2);
    expect(decodeClosure(1, { metrics: [m('a', 1)], citations: ['p. 3 says so'] })).toEqual({
      metrics: [m('a', 1)],
      citations: [{ anchor_type: 'text', anchor: 'p. 3 says so' }],
    });
    const v2 = { metrics: [m('a', 1)], citations: [{ anchor_type: 'journal_id', anchor: 'JE-1' }] };
    expect(decodeClosure(2, v2)).toEqual(v2);
  });

  it('names what it cannot read', () => {
    expect(() => decodeClosure(3, {})).toThrow(ArtifactDecodeError);
    expect(() => decodeClosure(2, { metrics: 'x' })).toThrow(/schema_version 2 body is malformed/);
  });
});

describe('idempotency request hash', () => {
  it('ignores key order but not values', () => {
    expect(requestHash({ a: 1, b: [{ x: 1, y: 2 }] })).toBe(requestHash({ b: [{ y: 2, x: 1 }], a: 1 }));
    expect(requestHash({ a: 1 })).not.toBe(requestHash({ a: 2 }));
    expect(requestHash({ a: [1, 2] })).not.toBe(requestHash({ a: [2, 1] }));
  });
});

describe('send-as', () => {
  const caller = identityFor({ email: 'user@example.com', sub: 's' });
  it('is the caller without as_user_email or with their own address', () => {
    expect(resolveSender(caller, undefined, [])).toEqual({ email: 'user@example.com', sendAs: false });
    expect(resolveSender(caller, 'USER@example.com', [])).toEqual({
      email: 'user@example.com',
      sendAs: false,
    });
  });
  it('needs the caller in the admin list for another mailbox, and the power in the token', () => {
    const admins = ['user@example.com'];
    expect(() => resolveSender(caller, 'boss@example.com', ['admin@example.com'])).toThrow(
      SendAsForbiddenError,
    );
    // An admin's token held by a client other than platform-cli, without mail:send_as: refused.
    expect(() => resolveSender(caller, 'boss@example.com', admins)).toThrow(SendAsForbiddenError);
    const allowed = [
      { scope: 'openid mcp:mail mail:send_as' },
      { scope: 'mcp:mail mail:send_as', issuer: 'entra' as const, clientId: 'connector' },
      { scope: 'openid mcp:mail platform:admin', clientId: 'platform-cli' },
    ];
    for (const over of allowed) {
      expect(resolveSender({ ...caller, ...over }, 'Boss@example.com', admins), JSON.stringify(over)).toEqual(
        {
          email: 'boss@example.com',
          sendAs: true,
        },
      );
    }
    const refused = [
      // platform-cli without platform:admin: a device-flow token (never carries either power).
      { scope: 'openid mcp:mail', clientId: 'platform-cli' },
      // platform:admin counts only for platform-cli tokens of the platform issuer.
      { scope: 'mcp:mail platform:admin', clientId: 'connector' },
      { scope: 'mcp:mail platform:admin', clientId: 'platform-cli', issuer: 'service' as const },
    ];
    for (const over of refused) {
      expect(
        () => resolveSender({ ...caller, ...over }, 'boss@example.com', admins),
        JSON.stringify(over),
      ).toThrow(SendAsForbiddenError);
    }
    // The scope without the admin list is nothing.
    expect(() =>
      resolveSender({ ...caller, scope: 'mcp:mail mail:send_as' }, 'boss@example.com', ['admin@example.com']),
    ).toThrow(SendAsForbiddenError);
  });
});

describe('host guard', () => {
  const req = (host: string, origin?: string) =>
    ({ headers: { host, ...(origin ? { origin } : {}) } }) as IncomingMessage;
  const patterns = (...ps: string[]) => ps.map((p) => parseHostPattern(p) as HostPattern);
  const guard = createHostGuard(patterns('localhost:*', 'deals:3000', '*.tools.example', '[::1]:*'), [
    'https://app.example.com',
  ]);
  it('matches host:* on any port, host:port exactly, *.domain on subdomains and bracketed IPv6', () => {
    for (const ok of [
      'localhost',
      'localhost:1',
      'LOCALHOST:65535',
      'deals:3000',
      'a.tools.example',
      '[::1]:80',
    ])
      expect(() => guard.check(req(ok))).not.toThrow();
    for (const bad of [
      'localhost.evil.com',
      'localhost:x',
      'deals:3001',
      'deals',
      'evil:3000',
      'tools.example',
      'a.tools.example:8443',
      'a.tools.example.evil',
      '[::1',
      '[::1]x',
    ]) {
      expect(() => guard.check(req(bad))).toThrow(/Invalid Host header/);
    }
  });
  it('refuses a present, unlisted Origin', () => {
    expect(() => guard.check(req('deals:3000', 'https://app.example.com'))).not.toThrow();
    expect(() => guard.check(req('deals:3000', 'https://evil.example'))).toThrow(/origin/);
  });
  it('is off with empty lists', () => {
    expect(() => createHostGuard([], []).check(req('anything:1', 'https://x'))).not.toThrow();
  });
});

describe('tool errors', () => {
  const log = createLogger({ name: 't', level: 'silent' });
  it('maps an unreachable database to database_unavailable and hides internals of other faults', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    expect(toolErrorResult(refused, log)).toEqual({
      isError: true,
      content: [{ type: 'text', text: expect.stringContaining('"code":"database_unavailable"') }],
    });
    const bug = toolErrorResult(new Error('column "secret" does not exist'), log);
    expect(JSON.parse((bug.content[0] as { text: string }).text)).toEqual({
      error: { code: 'internal_error', message: 'internal error', status: 500 },
    });
  });
});

describe('configuration', () => {
  const base = { DATABASE_URL: 'postgresql://u@h/db', TOOL_IDENTITY_KEY: 'ab'.repeat(32) };
  it('has the contract defaults and reads the per-service port', () => {
    const c = loadToolConfig('deals', base);
    expect(c).toMatchObject({
      service: 'deals',
      port: 3000,
      adminEmails: [],
      usersTable: 'users',
      graph: undefined,
    });
    expect(Object.isFrozen(c)).toBe(true);
    expect(loadToolConfig('mail', { ...base, MAIL_MCP_PORT: '3100', DEALS_MCP_PORT: '1' }).port).toBe(3100);
  });
  it('lowercases admin emails and defaults the Graph URLs from the tenant', () => {
    const c = loadToolConfig('mail', {
      ...base,
      PLATFORM_ADMIN_EMAILS: 'A@Example.com, b@example.com',
      GRAPH_TENANT_ID: 'contoso.onmicrosoft.com',
      GRAPH_CLIENT_ID: 'id',
      GRAPH_CLIENT_SECRET: 'secret',
    });
    expect(c.adminEmails).toEqual(['a@example.com', 'b@example.com']);
    expect(c.graph).toMatchObject({
      baseUrl: 'https://graph.microsoft.com/v1.0',
      tokenUrl: 'https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token',
    });
  });
  it('names the variable in every refusal', () => {
    const bad: Array<[string, Record<string, string>, string]> = [
      ['deals', { ...base, DATABASE_URL: 'sqlite:///app.db' }, 'DATABASE_URL'],
      ['deals', { ...base, DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
      ['deals', { ...base, DEALS_MCP_ALLOWED_HOSTS: 'a b' }, 'DEALS_MCP_ALLOWED_HOSTS'],
      [
        'deals',
        { ...base, DEALS_MCP_ALLOWED_ORIGINS: 'https://x.example/path' },
        'DEALS_MCP_ALLOWED_ORIGINS',
      ],
      ['deals', { ...base, PLATFORM_AUTHJS_USERS_TABLE: 'users; drop' }, 'PLATFORM_AUTHJS_USERS_TABLE'],
      ['mail', { ...base, GRAPH_CLIENT_SECRET: 's' }, 'GRAPH_TENANT_ID'],
    ];
    for (const [name, env, variable] of bad) {
      expect(() => loadToolConfig(name, env)).toThrow(ConfigError);
      try {
        loadToolConfig(name, env);
      } catch (err) {
        expect((err as ConfigError).variable).toBe(variable);
      }
    }
  });
});
