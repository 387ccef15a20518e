// `platform tool <name>` as a real process: start-up order and logs, health, SIGTERM, and every way the boot
// must stop before listening (bad DATABASE_URL, Postgres down, schema missing, bad settings).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { freePort, startPlatform } from '../helpers/processes.ts';
import { toolKey } from './helpers.ts';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.drop();
});

function nonEmptyLines(text: string): string[] {
  return text.split('\n').filter((l) => l.trim() !== '');
}

describe('a healthy start', () => {
  it('probes the database, starts the session manager, then listens; SIGTERM exits 0', async () => {
    const port = await freePort();
    const p = startPlatform(['tool', 'deals'], {
      DATABASE_URL: db.url,
      TOOL_IDENTITY_KEY: toolKey('deals'),
      DEALS_MCP_PORT: String(port),
    });
    try {
      await p.waitFor(/deals tool server listening/);
      const msgs = p.logs().map((l) => l.msg);
      const probe = msgs.indexOf('DB reachable, schema accessible');
      const manager = msgs.indexOf('MCP session manager started');
      const listening = msgs.indexOf('deals tool server listening');
      expect(probe).toBeGreaterThanOrEqual(0);
      expect(manager).toBeGreaterThan(probe);
      expect(listening).toBeGreaterThan(manager);
      for (const path of ['/health', '/deals/health']) {
        expect((await fetch(`http://127.0.0.1:${port}${path}`)).status).toBe(200);
        expect((await fetch(`http://127.0.0.1:${port}${path}`, { method: 'HEAD' })).status).toBe(200);
      }
      const unsigned = await fetch(`http://127.0.0.1:${port}/deals/mcp`, { method: 'POST' });
      expect(unsigned.status).toBe(401);
    } finally {
      expect(await p.stop()).toBe(0);
    }
    expect(p.logs().map((l) => l.msg)).toContain('stopped');
  });

  it('accepts the postgresql+asyncpg:// spelling of the URL', async () => {
    const port = await freePort();
    const url = db.url.replace(/^postgresql:/, 'postgresql+asyncpg:');
    const p = startPlatform(['tool', 'platform'], {
      DATABASE_URL: url,
      TOOL_IDENTITY_KEY: toolKey('platform'),
      PLATFORM_MCP_PORT: String(port),
    });
    try {
      await p.waitFor(/platform tool server listening/);
    } finally {
      expect(await p.stop()).toBe(0);
    }
  });
});

describe('a start that must fail before listening', () => {
  async function failedStart(
    args: string[],
    env: Record<string, string>,
  ): Promise<{ code: number | null; output: string }> {
    const p = startPlatform(args, { TOOL_IDENTITY_KEY: toolKey(args[1] ?? ''), ...env });
    const code = await p.exited;
    return { code, output: p.output() };
  }

  it('a SQLite-style DATABASE_URL exits non-zero with one line naming the variable', async () => {
    const { code, output } = await failedStart(['tool', 'deals'], {
      DATABASE_URL: 'sqlite:///./data/app.db',
    });
    expect(code).not.toBe(0);
    expect(nonEmptyLines(output)).toEqual([
      expect.stringMatching(/DATABASE_URL: must begin with postgresql:\/\/ or postgresql\+asyncpg:\/\//),
    ]);
  });

  it('Postgres stopped: the probe fails and the process exits non-zero without listening', async () => {
    const dead = await freePort();
    const port = await freePort();
    const { code, output } = await failedStart(['tool', 'mail'], {
      DATABASE_URL: `postgresql://postgres@127.0.0.1:${dead}/platform`,
      MAIL_MCP_PORT: String(port),
    });
    expect(code).not.toBe(0);
    expect(output).toMatch(/database probe failed: connect ECONNREFUSED 127\.0\.0\.1:\d+/);
    expect(output).not.toMatch(/DB reachable|listening/);
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
  });

  it('a database without the migrations fails the probe naming the missing tables', async () => {
    const bare = await createTestDatabase({ migrated: false });
    try {
      const { code, output } = await failedStart(['tool', 'deals'], {
        DATABASE_URL: bare.url,
        DEALS_MCP_PORT: String(await freePort()),
      });
      expect(code).not.toBe(0);
      expect(output).toMatch(
        /database schema not accessible: missing platform\.deal_artifacts, platform\.idempotency_keys/,
      );
    } finally {
      await bare.drop();
    }
  });

  it('an unknown server name, a missing or malformed key, the master secret or half the Graph settings stop it with one line', async () => {
    const cases: Array<[string[], Record<string, string>, RegExp]> = [
      [['tool', 'crm'], { DATABASE_URL: db.url }, /unknown tool server "crm"/],
      [['tool', 'deals'], { DATABASE_URL: db.url, TOOL_IDENTITY_KEY: '' }, /TOOL_IDENTITY_KEY: is required/],
      [
        ['tool', 'deals'],
        { DATABASE_URL: db.url, TOOL_IDENTITY_KEY: 'a-gateway-secret-given-by-mistake-0123456789' },
        /TOOL_IDENTITY_KEY: must be the 64-character hex key printed by `platform identity-key deals`/,
      ],
      [
        ['tool', 'deals'],
        { DATABASE_URL: db.url, GATEWAY_IDENTITY_SECRET: 'the-master-secret-0123456789abcdef0123' },
        /GATEWAY_IDENTITY_SECRET: must not be given to a tool server/,
      ],
      [
        ['tool', 'mail'],
        { DATABASE_URL: db.url, GRAPH_TENANT_ID: 't' },
        /GRAPH_CLIENT_ID: is required when GRAPH_TENANT_ID is set/,
      ],
      [
        ['tool', 'deals'],
        { DATABASE_URL: db.url, DEALS_MCP_PORT: 'http' },
        /DEALS_MCP_PORT: must be a port number/,
      ],
    ];
    const results = await Promise.all(cases.map(([args, env]) => failedStart(args, env)));
    results.forEach(({ code, output }, i) => {
      expect(code).not.toBe(0);
      expect(nonEmptyLines(output)).toEqual([expect.stringMatching(cases[i]![2])]);
    });
  });
});
