import { describe, expect, it } from 'vitest';
import { ForbiddenToolError, InsufficientScopeError } from '../../gateway/errors.ts';
import { type Caller, compilePolicy } from '../../gateway/policy/compile.ts';
import { createPolicyCheck } from '../../gateway/policy/gate.ts';
import { PolicyFileError, parsePolicy, parsePolicyDocument } from '../../gateway/policy/load.ts';
import { narrowJsonBody, SseToolsNarrower } from '../../gateway/policy/tools-list.ts';

// The per-tool policy as a unit: the file's validation (one line naming the bad rule), the compiled matcher
// (first match decides, no match denies), the request check and the tools/list narrowing. The gateway's use of
// it over HTTP is in policy.test.ts.

const SERVICES = ['deals', 'mail', 'platform'];

function check(yaml: string) {
  return createPolicyCheck(compilePolicy(parsePolicy(yaml, { services: SERVICES }), SERVICES));
}

const caller = (over: Partial<Caller> = {}): Caller => ({
  email: 'ann@example.com',
  kind: 'platform',
  scopes: ['openid', 'mcp:deals'],
  actor: '',
  ...over,
});

const call = (tool: string, id = 1) =>
  Buffer.from(
    JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: {} } }),
  );
const list = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }));

function refusal(fn: () => unknown): ForbiddenToolError | InsufficientScopeError | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ForbiddenToolError || err instanceof InsufficientScopeError) return err;
    throw err;
  }
  return undefined;
}

describe('policy file validation', () => {
  const bad = (yaml: string) => {
    try {
      parsePolicy(yaml, { services: SERVICES });
    } catch (err) {
      expect(err).toBeInstanceOf(PolicyFileError);
      const message = (err as Error).message;
      expect(message).not.toContain('\n');
      return message;
    }
    throw new Error('accepted');
  };

  it('names the bad rule by position and line', () => {
    expect(bad('rules:\n  - effect: allow\n  - effect: permit\n')).toBe(
      'rule 2 (rules[1], line 3): effect must be one of allow, deny, require_scope',
    );
    expect(bad('rules:\n  - effect: require_scope\n    tool: x\n')).toBe(
      'rule 1 (rules[0], line 2): required_scope is required',
    );
    expect(bad('rules:\n  - effect: deny\n    emial: a@example.com\n')).toMatch(
      /rules\[0\].*unknown key "emial"/,
    );
    expect(bad('rules:\n  - {effect: deny, email: not-an-email}\n')).toMatch(
      /rules\[0\].*email: must be an email/,
    );
    expect(bad('rules:\n  - {effect: deny, issuer: google}\n')).toMatch(
      /issuer: must be platform, entra or service/,
    );
    expect(bad('rules:\n  - {effect: deny, service: crm}\n')).toMatch(
      /service "crm" is not one of GATEWAY_SERVICES/,
    );
    expect(bad('rules:\n  - {effect: deny, method: tools/list, tool: x}\n')).toMatch(
      /tool only matches method tools\/call/,
    );
    expect(bad('rules:\n  - deny\n')).toMatch(/must be a mapping of matchers and an effect/);
  });

  it('refuses what is not a rules list, and YAML errors with their line', () => {
    expect(bad('')).toMatch(/`rules:` list/);
    expect(bad('rules: {effect: allow}\n')).toMatch(/`rules:` must be a list/);
    expect(bad('rules: []\nextra: 1\n')).toMatch(/unknown top-level key "extra"/);
    expect(bad('rules: [\n')).toMatch(/^not valid YAML at line \d+/);
  });

  it('accepts lists, *@domain, a space-separated scope and an empty rules list', () => {
    const rules = parsePolicy(
      `rules:
  - service: [deals, mail]
    method: tools/call
    tool: [a, b]
    email: ['*@example.com', Bob@Example.com]
    issuer: [platform, entra]
    scope: openid mcp:deals
    effect: require_scope
    required_scope: mcp:deals:write
    description: writers only
`,
      { services: SERVICES },
    );
    expect(rules).toHaveLength(1);
    expect(parsePolicy('rules: []\n', { services: SERVICES })).toEqual([]);
  });
});

describe('limits: validation', () => {
  const ALLOW = 'rules:\n  - effect: allow\n';
  const bad = (limits: string) => {
    try {
      parsePolicyDocument(`${ALLOW}limits:\n${limits}`, { services: SERVICES });
    } catch (err) {
      expect(err).toBeInstanceOf(PolicyFileError);
      return (err as Error).message;
    }
    throw new Error('accepted');
  };

  it('reads service, tool, per and rate', () => {
    const doc = parsePolicyDocument(
      `${ALLOW}limits:\n  - service: mail\n    tool: [send_mail]\n    per: client\n    rate: 10/60\n  - per: email\n    rate: 100/3600\n`,
      { services: SERVICES },
    );
    expect(doc.limits).toEqual([
      { service: 'mail', tool: ['send_mail'], per: 'client', rate: { count: 10, seconds: 60 } },
      { per: 'email', rate: { count: 100, seconds: 3600 } },
    ]);
    expect(parsePolicyDocument(ALLOW, { services: SERVICES }).limits).toEqual([]);
  });

  it('names the bad limit by position and line', () => {
    expect(bad('  - per: email\n    rate: 10 per minute\n')).toBe(
      'limit 1 (limits[0], line 4): rate: must be <count>/<seconds> with whole numbers above 0, e.g. 60/60',
    );
    expect(bad('  - per: email\n    rate: 0/60\n')).toMatch(/^limit 1 .*rate: must be/);
    expect(bad('  - per: user\n    rate: 1/1\n')).toBe(
      'limit 1 (limits[0], line 4): per: must be email or client',
    );
    expect(bad('  - rate: 1/1\n')).toBe('limit 1 (limits[0], line 4): per: must be email or client');
    expect(bad('  - per: email\n    rate: 1/1\n    services: mail\n')).toBe(
      'limit 1 (limits[0], line 4): unknown key "services"',
    );
    expect(bad('  - per: email\n    rate: 1/1\n    service: mial\n')).toMatch(
      /^limit 1 \(limits\[0\], line 4\): service "mial" is not one of GATEWAY_SERVICES/,
    );
    expect(bad('  - per: email\n    rate: 1/1\n  - per: email\n    rate: 1/1\n')).toBe(
      'limit 2 (limits[1], line 6): the same limit as limit 1',
    );
    expect(bad('  per: email\n')).toBe('`limits:` must be a list');
  });
});

describe('decisions', () => {
  const policy = check(`
rules:
  - service: deals
    tool: propose_deal_closure
    email: intern@example.com
    effect: deny
  - service: deals
    tool: propose_deal_closure
    effect: require_scope
    required_scope: mcp:deals:write
  - service: mail
    issuer: entra
    effect: deny
  - service: mail
    email: '*@partner.example'
    tool: [send_mail]
    effect: deny
  - scope: mcp:deals
    effect: allow
  - service: [mail, platform]
    effect: allow
`);

  it('the first matching rule decides', () => {
    const intern = caller({ email: 'intern@example.com', scopes: ['mcp:deals', 'mcp:deals:write'] });
    expect(refusal(() => policy.check('deals', call('propose_deal_closure'), intern))).toBeInstanceOf(
      ForbiddenToolError,
    );
    // The same intern's other tools fall through to the allow rule.
    expect(refusal(() => policy.check('deals', call('get_conflicts'), intern))).toBeUndefined();
    expect(
      refusal(() =>
        policy.check(
          'deals',
          call('propose_deal_closure'),
          caller({ scopes: ['mcp:deals', 'mcp:deals:write'] }),
        ),
      ),
    ).toBeUndefined();
  });

  it('require_scope refuses with the scope to ask for', () => {
    const err = refusal(() => policy.check('deals', call('propose_deal_closure'), caller()));
    expect(err).toBeInstanceOf(InsufficientScopeError);
    expect((err as InsufficientScopeError).scope).toBe('mcp:deals:write');
  });

  it('matches issuer and *@domain, and denies what no rule matches', () => {
    expect(refusal(() => policy.check('mail', call('send_mail'), caller({ kind: 'entra' })))).toBeInstanceOf(
      ForbiddenToolError,
    );
    expect(
      refusal(() =>
        policy.check('mail', call('send_mail'), caller({ email: 'x@partner.example', scopes: [] })),
      ),
    ).toBeInstanceOf(ForbiddenToolError);
    expect(
      refusal(() =>
        policy.check(
          'mail',
          call('create_calendar_event'),
          caller({ email: 'x@partner.example', scopes: [] }),
        ),
      ),
    ).toBeUndefined();
    // No mcp:deals scope, service deals: no rule matches.
    const err = refusal(() => policy.check('deals', call('get_conflicts'), caller({ scopes: ['mcp:mail'] })));
    expect(err).toBeInstanceOf(ForbiddenToolError);
    expect(err?.reason).toBe('policy_denied');
    expect(err?.message).toMatch(/no policy rule allows the tool get_conflicts of deals/);
  });

  it('an email rule never matches a caller without an email', () => {
    const p = check('rules:\n  - {email: "*@example.com", effect: allow}\n');
    expect(refusal(() => p.check('deals', call('x'), caller({ email: '' })))).toBeInstanceOf(
      ForbiddenToolError,
    );
    expect(refusal(() => p.check('deals', call('x'), caller()))).toBeUndefined();
  });

  it('actor: matches the client acting for the user (`*`: any), never a request without one', () => {
    const p = check(
      `rules:
  - {actor: reporting-agent, tool: get_conflicts, effect: allow}
  - {actor: "*", effect: deny}
  - effect: allow
`,
    );
    const agent = caller({ actor: 'reporting-agent' });
    expect(refusal(() => p.check('deals', call('get_conflicts'), agent))).toBeUndefined();
    // The same agent on another tool, and another agent on this one: the `*` rule denies.
    expect(refusal(() => p.check('deals', call('propose_deal_closure'), agent))).toBeInstanceOf(
      ForbiddenToolError,
    );
    expect(
      refusal(() => p.check('deals', call('get_conflicts'), caller({ actor: 'other-agent' }))),
    ).toBeInstanceOf(ForbiddenToolError);
    // The user's own client (no actor) is matched by neither actor rule.
    expect(refusal(() => p.check('deals', call('propose_deal_closure'), caller()))).toBeUndefined();
    expect(() => parsePolicy('rules:\n  - {actor: [], effect: allow}\n', { services: SERVICES })).toThrow(
      /actor/,
    );
  });

  it('method rules see every request; a batch is refused when one of its calls is', () => {
    const p = check('rules:\n  - {method: initialize, effect: allow}\n  - {tool: whoami, effect: allow}\n');
    const init = Buffer.from('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}');
    expect(refusal(() => p.check('platform', init, caller()))).toBeUndefined();
    expect(refusal(() => p.check('platform', call('whoami'), caller()))).toBeUndefined();
    expect(refusal(() => p.check('platform', list, caller()))).toBeInstanceOf(ForbiddenToolError);
    // Not JSON, or no body (a GET stream): only rules without method/tool matchers apply.
    expect(refusal(() => p.check('platform', Buffer.from('nonsense'), caller()))).toBeInstanceOf(
      ForbiddenToolError,
    );
    expect(refusal(() => p.check('platform', undefined, caller()))).toBeInstanceOf(ForbiddenToolError);
    const batch = Buffer.from(
      JSON.stringify([JSON.parse(call('whoami').toString()), JSON.parse(call('other').toString())]),
    );
    expect(refusal(() => p.check('platform', batch, caller()))).toBeInstanceOf(ForbiddenToolError);
  });

  it('a tool name that is a method name, or __proto__, is only a tool name', () => {
    const p = check(
      'rules:\n  - {tool: tools/list, effect: deny}\n  - {tool: __proto__, effect: deny}\n  - {effect: allow}\n',
    );
    expect(refusal(() => p.check('deals', list, caller()))).toBeUndefined();
    expect(refusal(() => p.check('deals', call('__proto__'), caller()))).toBeInstanceOf(ForbiddenToolError);
    expect(refusal(() => p.check('deals', call('constructor'), caller()))).toBeUndefined();
  });

  it('tools/list hands back the filter: denied tools hidden, step-up tools listed', () => {
    const intern = caller({ email: 'intern@example.com' });
    const filter = policy.check('deals', list, intern)!;
    expect(filter('get_conflicts')).toBe(true);
    expect(filter('propose_deal_closure')).toBe(false);
    expect(policy.check('deals', list, caller())!('propose_deal_closure')).toBe(true);
    expect(policy.check('deals', call('get_conflicts'), intern)).toBeUndefined();
  });
});

describe('remembered decisions', () => {
  it('are per caller, service, method and tool, and start afresh with new rules', () => {
    const yaml =
      'rules:\n  - {tool: a, email: ann@example.com, effect: deny}\n  - {tool: a, issuer: entra, effect: deny}\n  - {effect: allow}\n';
    const p = check(yaml);
    const ann = caller();
    const bob = caller({ email: 'bob@example.com' });
    for (let i = 0; i < 3; i++) {
      expect(refusal(() => p.check('deals', call('a'), ann))).toBeInstanceOf(ForbiddenToolError);
      expect(refusal(() => p.check('deals', call('b'), ann))).toBeUndefined();
      expect(refusal(() => p.check('deals', call('a'), bob))).toBeUndefined();
    }
    // More distinct tools than a caller's memo holds: decisions stay right past the bound.
    for (let i = 0; i < 100; i++) expect(refusal(() => p.check('mail', call(`t${i}`), ann))).toBeUndefined();
    expect(refusal(() => p.check('mail', call('a'), ann))).toBeInstanceOf(ForbiddenToolError);
    const reloaded = check(yaml.replace('email: ann@example.com', 'email: bob@example.com'));
    expect(refusal(() => reloaded.check('deals', call('a'), ann))).toBeUndefined();
    expect(refusal(() => reloaded.check('deals', call('a'), bob))).toBeInstanceOf(ForbiddenToolError);
  });
});

describe('tools/list narrowing', () => {
  const keep = (name: string) => name !== 'secret';
  const result = {
    jsonrpc: '2.0',
    id: 7,
    result: {
      tools: [{ name: 'open', inputSchema: {} }, { name: 'secret', inputSchema: {} }, { title: 'no name' }],
    },
  };

  it('rewrites a JSON answer and leaves other answers alone', () => {
    expect(JSON.parse(narrowJsonBody(JSON.stringify(result), keep)!).result.tools).toEqual([
      { name: 'open', inputSchema: {} },
    ]);
    expect(narrowJsonBody('{"jsonrpc":"2.0","id":1,"result":{"content":[]}}', keep)).toBeUndefined();
    expect(narrowJsonBody('not json', keep)).toBeUndefined();
  });

  it('rewrites an SSE stream event by event, whatever the chunking and line endings', () => {
    const other = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}';
    for (const eol of ['\n', '\r\n', '\r']) {
      const stream = `id: 1${eol}data: ${other}${eol}${eol}event: message${eol}id: 2${eol}data: ${JSON.stringify(result)}${eol}${eol}`;
      const bytes = Buffer.from(stream);
      for (const size of [1, 3, 17, bytes.length]) {
        const n = new SseToolsNarrower(keep);
        let out = '';
        for (let i = 0; i < bytes.length; i += size) out += n.push(bytes.subarray(i, i + size));
        out += n.end();
        const events = out.split('\n\n').filter((e) => e !== '');
        expect(events).toHaveLength(2);
        expect(events[0]).toBe(`id: 1\ndata: ${other}`);
        expect(events[1]!.split('\n').slice(0, 2)).toEqual(['event: message', 'id: 2']);
        const data = JSON.parse(events[1]!.split('\n')[2]!.slice('data: '.length));
        expect(data.result.tools.map((t: { name: string }) => t.name)).toEqual(['open']);
      }
    }
  });

  it('passes an event on as soon as it is complete', () => {
    const n = new SseToolsNarrower(keep);
    expect(n.push(Buffer.from(`data: ${JSON.stringify(result)}\n`))).toBe('');
    expect(n.push(Buffer.from('\n'))).toMatch(/^data: .*"open".*\n\n$/);
    // A multi-byte character split across chunks survives.
    const text = Buffer.from('data: {"jsonrpc":"2.0","id":1,"result":{"text":"héllo"}}\n\n');
    const cut = text.indexOf(0xc3) + 1;
    expect(n.push(text.subarray(0, cut)) + n.push(text.subarray(cut))).toBe(text.toString());
  });
});
