// Two replicas of each tool server behind a running `platform gateway`: an MCP 2026-07-28 client (SDK v2) and a
// 2025-11-25 client (v1 SDK) each make their calls, which land on both replicas (no session ties a client to
// one), a write tool keeps its idempotency across replicas, and killing one replica mid-run fails no call that
// had not reached it.
import { randomUUID } from 'node:crypto';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { signIn } from '../helpers/oauth.ts';
import type { RunningProcess } from '../helpers/processes.ts';
import { type Stack, startStack } from './stack.ts';

const SCOPE = 'openid email mcp:platform mcp:mail mcp:deals';
const CALLS = 24;

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ replicas: 2 });
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

type Result = { isError?: boolean; structuredContent?: unknown; content?: unknown };
interface Caller {
  era: 'modern' | 'legacy';
  version(): string | undefined;
  call(service: 'platform' | 'deals', name: string, args?: Record<string, unknown>): Promise<Result>;
  close(): Promise<void>;
}

/** One client per service (an MCP client talks to one endpoint), all of one era, holding one user's token. */
async function caller(era: 'modern' | 'legacy', token: string): Promise<Caller> {
  const auth = { authorization: `Bearer ${token}` };
  const clients = new Map<string, ModernClient | LegacyClient>();
  for (const service of ['platform', 'deals']) {
    const url = new URL(`${stack.baseUrl}/${service}/mcp`);
    if (era === 'modern') {
      const c = new ModernClient(
        { name: 'replicas-modern', version: '1.0.0' },
        { versionNegotiation: { mode: { pin: '2026-07-28' } } },
      );
      await c.connect(new ModernTransport(url, { requestInit: { headers: auth } }));
      clients.set(service, c);
    } else {
      const c = new LegacyClient({ name: 'replicas-legacy', version: '1.0.0' });
      await c.connect(new LegacyTransport(url, { requestInit: { headers: auth } }));
      clients.set(service, c);
    }
  }
  return {
    era,
    version: () => {
      const c = clients.get('platform')!;
      return c instanceof ModernClient ? c.getNegotiatedProtocolVersion() : undefined;
    },
    call: (service, name, args = {}) =>
      clients.get(service)!.callTool({ name, arguments: args }) as Promise<Result>,
    close: async () => {
      for (const c of clients.values()) await c.close().catch(() => {});
    },
  };
}

/** How many tool calls of `email` each replica of `service` logged. */
function callsPerReplica(replicas: RunningProcess[], email: string, tool: string): number[] {
  return replicas.map(
    (p) => p.logs().filter((l) => l.msg === 'tool call' && l.caller === email && l.tool === tool).length,
  );
}

async function signedIn(): Promise<{ user: SeededUser; token: string }> {
  const user = await seedUser(stack.db.pool);
  const token = (await signIn(stack.idp.issuer, user.sessionToken, { scope: SCOPE })).access_token;
  return { user, token };
}

async function settle(check: () => boolean): Promise<void> {
  // Log lines reach this process through a pipe: give the last ones a moment.
  for (let i = 0; i < 50 && !check(); i++) await new Promise((r) => setTimeout(r, 20));
}

describe('two replicas of each tool server behind the gateway', () => {
  for (const era of ['modern', 'legacy'] as const) {
    it(`${era === 'modern' ? '2026-07-28 (SDK v2)' : '2025-11-25 (v1 SDK)'} client: ${CALLS} calls, all succeed, on both replicas`, async () => {
      const { user, token } = await signedIn();
      const c = await caller(era, token);
      try {
        if (era === 'modern') expect(c.version()).toBe('2026-07-28');
        for (let i = 0; i < CALLS; i++) {
          const r = await c.call('platform', 'whoami');
          expect(r.isError).toBeFalsy();
          expect(r.structuredContent).toMatchObject({ email: user.email });
        }
      } finally {
        await c.close();
      }
      const counts = () => callsPerReplica(stack.replicas.platform, user.email, 'whoami');
      await settle(() => counts()[0]! + counts()[1]! === CALLS);
      const [first, second] = counts();
      expect(first! + second!).toBe(CALLS);
      expect(first).toBeGreaterThan(0);
      expect(second).toBeGreaterThan(0);
    });

    it(`${era} client: a proposal repeated with one idempotency key is stored once, whichever replica answers`, async () => {
      const { user, token } = await signedIn();
      const c = await caller(era, token);
      const proposal = {
        deal_id: `deal-${randomUUID()}`,
        metrics: [{ name: 'arr', value: 100, source_file: 'a.xlsx', location: 'B2' }],
        citations: [],
        idempotency_key: randomUUID(),
      };
      try {
        const results = [];
        for (let i = 0; i < 4; i++) results.push(await c.call('deals', 'propose_deal_closure', proposal));
        for (const r of results) expect(r.isError, JSON.stringify(r)).toBeFalsy();
        const bodies = results.map(
          (r) => r.structuredContent as { artifact_id: string; was_inserted: boolean },
        );
        expect(bodies.filter((b) => b.was_inserted)).toHaveLength(1);
        expect(new Set(bodies.map((b) => b.artifact_id)).size).toBe(1);
      } finally {
        await c.close();
      }
      const counts = () => callsPerReplica(stack.replicas.deals, user.email, 'propose_deal_closure');
      await settle(() => counts()[0]! + counts()[1]! === 4);
      expect(counts().every((n) => n > 0)).toBe(true);
    });
  }

  it('killing one replica mid-run fails no call that had not reached it', async () => {
    const modern = await signedIn();
    const legacy = await signedIn();
    const clients = [await caller('modern', modern.token), await caller('legacy', legacy.token)];
    /** When SIGKILL was sent, and when the replica was gone (its sockets closed by the kernel). */
    let killedAt = Number.POSITIVE_INFINITY;
    let goneAt = Number.POSITIVE_INFINITY;
    const outcomes: Array<{ started: number; ended: number; ok: boolean; error?: string }> = [];
    const run = async (c: Caller) => {
      for (let i = 0; i < CALLS; i++) {
        const started = performance.now();
        try {
          const r = await c.call('platform', 'whoami');
          outcomes.push({ started, ended: performance.now(), ok: r.isError !== true });
        } catch (err) {
          outcomes.push({ started, ended: performance.now(), ok: false, error: (err as Error).message });
        }
      }
    };
    const victim = stack.replicas.platform[1]!;
    const killer = (async () => {
      while (outcomes.length < 10) await new Promise((r) => setTimeout(r, 5));
      killedAt = performance.now();
      victim.child.kill('SIGKILL');
      await victim.exited;
      goneAt = performance.now();
    })();
    try {
      await Promise.all([...clients.map(run), killer]);
    } finally {
      for (const c of clients) await c.close();
    }
    expect(outcomes).toHaveLength(2 * CALLS);
    // A call may fail only if it was under way while the replica was dying (between the signal and the exit:
    // it may have reached it, and the gateway never sends such a call again); every call that started after
    // the replica was gone succeeded on the surviving one. Each client makes one call at a time.
    const failed = outcomes.filter((o) => !o.ok);
    for (const f of failed) {
      expect(f.started, JSON.stringify(f)).toBeLessThan(goneAt);
      expect(f.ended, JSON.stringify(f)).toBeGreaterThan(killedAt);
    }
    expect(failed.length).toBeLessThanOrEqual(clients.length);
    const after = outcomes.filter((o) => o.started > goneAt);
    expect(after.length).toBeGreaterThan(10);
    expect(after.every((o) => o.ok)).toBe(true);
  });
});
