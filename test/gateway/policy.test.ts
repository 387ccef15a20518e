// The per-tool policy in a running `platform gateway` (GATEWAY_POLICY_FILE) in front of the real tool servers,
// with tokens from a running `platform idp` and the real MCP SDK client: a tool denied to one email while
// another works, tools/list narrowed, require_scope answered with the scope to ask for, a malformed file
// stopping start-up with one line, and SIGHUP reloads under load without a failed call.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { seedUser } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import { startGatewayProcess, startPlatform } from '../helpers/processes.ts';
import { type Stack, startStack } from '../tools/stack.ts';

const SCOPE = 'openid email mcp:platform mcp:mail mcp:deals';
const dir = mkdtempSync(join(tmpdir(), 'gateway-policy-'));
const policyFile = join(dir, 'policy.yaml');

let stack: Stack;
let intern: { email: string; token: string };
let staff: { email: string; token: string };
let admin: { email: string; token: string };

function policy(extra = ''): string {
  return `# test policy
rules:
  - service: mail
    tool: send_mail
    email: ${intern.email}
    effect: deny
  - service: deals
    tool: propose_deal_closure
    effect: require_scope
    required_scope: platform:admin
${extra}  - scope: openid
    effect: allow
`;
}

beforeAll(async () => {
  const adminEmail = `admin-${randomUUID().slice(0, 8)}@example.com`;
  // The file needs the users' emails, the users need the stack's database: write a deny-all file first.
  writeFileSync(policyFile, 'rules: []\n');
  stack = await startStack({
    idpEnv: { PLATFORM_ADMIN_EMAILS: adminEmail },
    gatewayEnv: { GATEWAY_POLICY_FILE: policyFile },
  });
  const users = await Promise.all([
    seedUser(stack.db.pool, { email: `intern-${randomUUID().slice(0, 8)}@example.com` }),
    seedUser(stack.db.pool),
    seedUser(stack.db.pool, { email: adminEmail }),
  ]);
  const [i, s, a] = await Promise.all([
    signIn(stack.idp.issuer, users[0].sessionToken, { scope: SCOPE }),
    signIn(stack.idp.issuer, users[1].sessionToken, { scope: SCOPE }),
    signIn(stack.idp.issuer, users[2].sessionToken, { scope: `${SCOPE} platform:admin` }),
  ]);
  intern = { email: users[0].email, token: i.access_token };
  staff = { email: users[1].email, token: s.access_token };
  admin = { email: users[2].email, token: a.access_token };
  await reload(policy());
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Writes the file, sends SIGHUP, waits for the gateway's line saying how it went. */
async function reload(text: string): Promise<void> {
  const before = stack.gateway.output().length;
  writeFileSync(policyFile, text);
  stack.gateway.child.kill('SIGHUP');
  for (let i = 0; i < 200; i++) {
    const since = stack.gateway.output().slice(before);
    if (/policy reloaded|policy not reloaded/.test(since)) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('no reload line from the gateway');
}

async function connect(service: string, token: string): Promise<{ client: Client; close(): Promise<void> }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.baseUrl}/${service}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'policy-test', version: '1.0.0' });
  await client.connect(transport);
  return {
    client,
    async close() {
      await transport.terminateSession().catch(() => {});
      await client.close();
    },
  };
}

/** A raw tools/call through the gateway: the refusals are the gateway's, before any tool server. */
async function rawCall(service: string, token: string, tool: string) {
  const res = await fetch(`${stack.baseUrl}/${service}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: tool, arguments: {} },
    }),
  });
  const text = await res.text();
  let error: { code?: string; context?: { reason?: string } } | undefined;
  try {
    error = (JSON.parse(text) as { error?: typeof error }).error;
  } catch {
    error = undefined;
  }
  return { status: res.status, error, challenge: res.headers.get('www-authenticate') };
}

const mailArgs = { to: 'someone@example.com', subject: 'hello', body: 'policy test' };

describe('per-tool policy', () => {
  it('denies one tool to one email while the other tool works, and others keep it', async () => {
    const i = await connect('mail', intern.token);
    try {
      await expect(i.client.callTool({ name: 'send_mail', arguments: mailArgs })).rejects.toThrow(
        /FORBIDDEN_TOOL/,
      );
      const cal = (await i.client.callTool({
        name: 'create_calendar_event',
        arguments: {
          title: 'sync',
          start: '2026-12-01T10:00:00Z',
          end: '2026-12-01T10:30:00Z',
          attendees: ['someone@example.com'],
        },
      })) as CallToolResult;
      expect(cal.isError).toBeFalsy();
    } finally {
      await i.close();
    }
    const refused = await rawCall('mail', intern.token, 'send_mail');
    expect(refused.status).toBe(403);
    expect(refused.error).toMatchObject({ code: 'FORBIDDEN_TOOL', context: { reason: 'policy_denied' } });

    const s = await connect('mail', staff.token);
    try {
      const sent = (await s.client.callTool({ name: 'send_mail', arguments: mailArgs })) as CallToolResult;
      expect(sent.isError).toBeFalsy();
    } finally {
      await s.close();
    }
  });

  it('narrows tools/list to the tools the caller may call', async () => {
    const names = async (token: string) => {
      const c = await connect('mail', token);
      try {
        return (await c.client.listTools()).tools.map((t) => t.name).sort();
      } finally {
        await c.close();
      }
    };
    expect(await names(intern.token)).toEqual(['create_calendar_event']);
    expect(await names(staff.token)).toEqual(['create_calendar_event', 'send_mail']);
  });

  it('holds for the 2026-07-28 revision too (SDK v2 client, Mcp-Method/Mcp-Name headers, stateless)', async () => {
    const methods: string[] = [];
    const open2026 = async (token: string) => {
      const transport = new ModernTransport(new URL(`${stack.baseUrl}/mail/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
        fetch: (url, init) => {
          const m = new Headers(init?.headers).get('mcp-method');
          if (m) methods.push(m);
          return fetch(url, init);
        },
      });
      const client = new ModernClient(
        { name: 'policy-2026', version: '1.0.0' },
        { versionNegotiation: { mode: 'auto' } },
      );
      await client.connect(transport);
      return client;
    };
    const i = await open2026(intern.token);
    try {
      expect((await i.listTools()).tools.map((t) => t.name)).toEqual(['create_calendar_event']);
      await expect(i.callTool({ name: 'send_mail', arguments: mailArgs })).rejects.toThrow(
        /FORBIDDEN_TOOL|403/,
      );
    } finally {
      await i.close();
    }
    const s = await open2026(staff.token);
    try {
      expect((await s.listTools()).tools.map((t) => t.name).sort()).toEqual([
        'create_calendar_event',
        'send_mail',
      ]);
    } finally {
      await s.close();
    }
  });

  it('require_scope: 403 insufficient_scope naming the scope to ask for; a token with it passes', async () => {
    const r = await rawCall('deals', staff.token, 'propose_deal_closure');
    expect(r.status).toBe(403);
    expect(r.error?.code).toBe('INSUFFICIENT_SCOPE');
    expect(r.challenge).toContain('error="insufficient_scope"');
    expect(r.challenge).toContain('scope="platform:admin"');
    expect(r.challenge).toContain(
      `resource_metadata="${stack.baseUrl}/deals/.well-known/oauth-protected-resource"`,
    );
    // The admin's token carries platform:admin: the gateway lets the call through to the tool server (which
    // then judges the arguments).
    expect((await rawCall('deals', admin.token, 'propose_deal_closure')).status).not.toBe(403);
  });

  it('a request no rule matches is denied', async () => {
    await reload(policy().replace(/ {2}- scope: openid\n {4}effect: allow\n/, ''));
    try {
      const r = await rawCall('platform', staff.token, 'whoami');
      expect(r.status).toBe(403);
      expect(r.error?.context?.reason).toBe('policy_denied');
    } finally {
      await reload(policy());
    }
    expect((await rawCall('platform', staff.token, 'whoami')).status).not.toBe(403);
  });

  it('a bad file on SIGHUP keeps the rules in force and logs one line', async () => {
    const before = stack.gateway.output().length;
    await reload('rules:\n  - effect: allow\n  - effect: perhaps\n');
    const lines = stack.gateway
      .output()
      .slice(before)
      .split('\n')
      .filter((l) => l.includes('policy'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /policy not reloaded, the previous rules stay in force: rule 2 \(rules\[1\], line 3\)/,
    );
    expect((await rawCall('mail', intern.token, 'send_mail')).status).toBe(403);
    await reload(policy());
  });

  it('reloads on SIGHUP under load without a failed call', async () => {
    const sessions = await Promise.all(Array.from({ length: 4 }, () => connect('platform', staff.token)));
    let calls = 0;
    const failures: string[] = [];
    let running = true;
    const workers = sessions.map(async (s) => {
      while (running) {
        try {
          const r = (await s.client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult;
          if (r.isError) failures.push(JSON.stringify(r.content));
          calls++;
        } catch (err) {
          failures.push((err as Error).message);
        }
      }
    });
    // Variants that all allow whoami; reloaded back to back while the calls run.
    for (let n = 0; n < 10; n++) {
      await reload(policy(`  - service: deals\n    tool: tool-${n}\n    effect: deny\n`));
      await new Promise((r) => setTimeout(r, 30));
    }
    running = false;
    await Promise.all(workers);
    await Promise.all(sessions.map((s) => s.close()));
    expect(failures).toEqual([]);
    expect(calls).toBeGreaterThan(20);
    expect(stack.gateway.output().match(/policy reloaded/g)?.length).toBeGreaterThanOrEqual(10);
  });
});

describe('without a policy file', () => {
  it('SIGHUP is logged and the gateway keeps serving', async () => {
    const gw = await startGatewayProcess({
      PUBLIC_BASE_URL: 'http://127.0.0.1:8080',
      GATEWAY_SERVICES: 'mail',
      MAIL_MCP_UPSTREAM: 'http://127.0.0.1:9',
      REDIS_URL: inject('redisUrl'),
      GATEWAY_IDENTITY_SECRET: 'x'.repeat(40),
    });
    try {
      gw.child.kill('SIGHUP');
      await gw.waitFor(/no GATEWAY_POLICY_FILE: no policy to reload/);
      expect((await fetch(`${gw.url}/health`)).status).toBe(200);
    } finally {
      await gw.stop();
    }
  });
});

describe('a malformed policy file', () => {
  it('stops start-up with one line naming the variable, the file and the bad rule', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      'rules:\n  - service: mail\n    effect: allow\n  - service: mail\n    tool: send_mail\n    effect: deny\n    emial: x@example.com\n',
    );
    const p = startPlatform(['gateway'], {
      GATEWAY_PORT: '0',
      PUBLIC_BASE_URL: 'http://127.0.0.1:8080',
      GATEWAY_SERVICES: 'mail',
      MAIL_MCP_UPSTREAM: 'http://127.0.0.1:9',
      REDIS_URL: 'redis://127.0.0.1:9',
      GATEWAY_IDENTITY_SECRET: 'x'.repeat(40),
      GATEWAY_POLICY_FILE: bad,
    });
    expect(await p.exited).toBe(2);
    expect(p.output().trim().split('\n')).toEqual([
      `platform: configuration error: GATEWAY_POLICY_FILE: ${bad}: rule 2 (rules[1], line 4): unknown key "emial"`,
    ]);
    const missing = startPlatform(['gateway'], {
      GATEWAY_PORT: '0',
      PUBLIC_BASE_URL: 'http://127.0.0.1:8080',
      GATEWAY_SERVICES: 'mail',
      MAIL_MCP_UPSTREAM: 'http://127.0.0.1:9',
      REDIS_URL: 'redis://127.0.0.1:9',
      GATEWAY_IDENTITY_SECRET: 'x'.repeat(40),
      GATEWAY_POLICY_FILE: join(dir, 'absent.yaml'),
    });
    expect(await missing.exited).toBe(2);
    expect(missing.output()).toMatch(
      /^platform: configuration error: GATEWAY_POLICY_FILE: .*absent\.yaml: cannot read .*: ENOENT\n$/,
    );
  });
});
