// The deals server's write-tool rules (spec checks 17–21) through the real MCP SDK client, with the rows
// checked in the database: idempotency, the audit log, conflicts, citations and schema evolution.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import {
  connectMcp,
  type InProcessServer,
  identityFor,
  type McpConnection,
  type PostgresRelay,
  startInProcess,
  startPostgresRelay,
  toolJson,
} from './helpers.ts';

let db: TestDatabase;
let user: SeededUser;
let relay: PostgresRelay;
let server: InProcessServer;
let mcp: McpConnection;

beforeAll(async () => {
  db = await createTestDatabase();
  user = await seedUser(db.pool);
  relay = await startPostgresRelay(db.url);
  server = await startInProcess('deals', { DATABASE_URL: relay.url });
  mcp = await connectMcp(server.mcpUrl, identityFor(user));
});

afterAll(async () => {
  await mcp?.close();
  await server?.close();
  await relay?.close();
  await db?.drop();
});

function proposal(over: Record<string, unknown> = {}) {
  return {
    deal_id: `deal-${randomUUID()}`,
    metrics: [
      { name: 'revenue', value: 1_250_000.55, source_file: 'cim.pdf', location: 'p. 12' },
      { name: 'ebitda', value: 310_000, source_file: 'model.xlsx', location: 'Summary!C7' },
    ],
    citations: [
      {
        anchor_type: 'content_hash',
        anchor: 'sha256:ab12',
        source_file: 'cim.pdf',
        metric: 'revenue',
        value: 1_250_000.55,
      },
    ],
    idempotency_key: randomUUID(),
    ...over,
  };
}

async function count(table: string, dealId: string): Promise<number> {
  const { rows } = await db.pool.query(
    `SELECT count(*)::int AS n FROM platform.${table} WHERE deal_id = $1`,
    [dealId],
  );
  return rows[0].n;
}

describe('tools/list', () => {
  it('lists the three deals tools with their input schemas', async () => {
    const { tools } = { tools: await mcp.listTools() };
    expect(tools.map((t) => t.name).sort()).toEqual([
      'citation_status',
      'get_conflicts',
      'propose_deal_closure',
    ]);
    const propose = tools.find((t) => t.name === 'propose_deal_closure')!;
    expect(propose.inputSchema.required).toEqual(
      expect.arrayContaining(['deal_id', 'metrics', 'citations', 'idempotency_key']),
    );
  });
});

describe('idempotency (check 17)', () => {
  it('two identical calls give one ledger row; the second says was_inserted false', async () => {
    const args = proposal();
    const first = toolJson(await mcp.call('propose_deal_closure', args));
    const second = toolJson(await mcp.call('propose_deal_closure', args));
    expect(first).toMatchObject({ was_inserted: true, schema_version: 2 });
    expect(second).toEqual({ ...first, was_inserted: false });
    expect(await count('deal_artifacts', args.deal_id)).toBe(1);
    expect(await count('artifact_event', args.deal_id)).toBe(1);
  });

  it('treats a reordered but equal payload as the same call', async () => {
    const args = proposal();
    const first = toolJson(await mcp.call('propose_deal_closure', args));
    const reordered = {
      idempotency_key: args.idempotency_key,
      citations: args.citations.map((c) => Object.fromEntries(Object.entries(c).reverse())),
      metrics: args.metrics.map((m) => Object.fromEntries(Object.entries(m).reverse())),
      deal_id: args.deal_id,
      skill: 'manual',
    };
    expect(toolJson(await mcp.call('propose_deal_closure', reordered))).toEqual({
      ...first,
      was_inserted: false,
    });
  });

  it('the same key with a different payload is an IdempotencyConflict (409), and writes nothing', async () => {
    const args = proposal();
    await mcp.call('propose_deal_closure', args);
    const r = await mcp.call('propose_deal_closure', {
      ...args,
      metrics: [{ ...args.metrics[0]!, value: 1 }],
    });
    expect(r.isError).toBe(true);
    expect(toolJson(r)).toEqual({
      error: {
        code: 'IdempotencyConflict',
        status: 409,
        message: expect.stringContaining(args.idempotency_key),
      },
    });
    expect(await count('deal_artifacts', args.deal_id)).toBe(1);
  });

  it('20 parallel identical calls give one row, one inserted and nineteen replays', async () => {
    const args = proposal();
    const results = await Promise.all(
      Array.from({ length: 20 }, () => mcp.call('propose_deal_closure', args)),
    );
    const outs = results.map(toolJson);
    expect(outs.filter((o) => o.was_inserted === true)).toHaveLength(1);
    expect(new Set(outs.map((o) => o.artifact_id)).size).toBe(1);
    expect(await count('deal_artifacts', args.deal_id)).toBe(1);
    expect(await count('artifact_event', args.deal_id)).toBe(1);
  });

  it('keeps keys 24 hours: a key past its expiry starts a new artifact', async () => {
    const args = proposal();
    const first = toolJson(await mcp.call('propose_deal_closure', args));
    const { rows } = await db.pool.query(
      `SELECT extract(epoch FROM expires_at - created_at)::int AS kept FROM platform.idempotency_keys WHERE artifact_id = $1`,
      [first.artifact_id],
    );
    expect(rows[0].kept).toBe(24 * 3600);
    await db.pool.query(
      `UPDATE platform.idempotency_keys SET expires_at = now() - interval '1 second' WHERE artifact_id = $1`,
      [first.artifact_id],
    );
    const again = toolJson(await mcp.call('propose_deal_closure', args));
    expect(again.was_inserted).toBe(true);
    expect(again.artifact_id).not.toBe(first.artifact_id);
    expect(await count('deal_artifacts', args.deal_id)).toBe(2);
  });

  it('scopes keys to the caller: another user with the same key gets an artifact of their own', async () => {
    const other = await seedUser(db.pool);
    const theirs = await connectMcp(server.mcpUrl, identityFor(other));
    try {
      const args = proposal();
      const mine = toolJson(await mcp.call('propose_deal_closure', args));
      const second = toolJson(await theirs.call('propose_deal_closure', args));
      expect(second.was_inserted).toBe(true);
      expect(second.artifact_id).not.toBe(mine.artifact_id);
    } finally {
      await theirs.close();
    }
  });
});

describe('artifacts and the audit log', () => {
  it('stores schema_version and skill (default manual), and an append-only propose event', async () => {
    const manual = proposal();
    const bySkill = proposal({ skill: 'closing-checklist' });
    const a = toolJson(await mcp.call('propose_deal_closure', manual));
    const b = toolJson(await mcp.call('propose_deal_closure', bySkill));
    const { rows } = await db.pool.query(
      'SELECT artifact_id, schema_version, skill, created_by FROM platform.deal_artifacts WHERE artifact_id = ANY($1) ORDER BY skill',
      [[a.artifact_id, b.artifact_id]],
    );
    expect(rows).toEqual([
      { artifact_id: b.artifact_id, schema_version: 2, skill: 'closing-checklist', created_by: user.email },
      { artifact_id: a.artifact_id, schema_version: 2, skill: 'manual', created_by: user.email },
    ]);
    const ev = await db.pool.query(
      'SELECT op, actor_email, actor_sub, detail FROM platform.artifact_event WHERE artifact_id = $1',
      [a.artifact_id],
    );
    expect(ev.rows).toEqual([
      {
        op: 'propose',
        actor_email: user.email,
        actor_sub: user.sub,
        detail: expect.objectContaining({
          idempotency_key: manual.idempotency_key,
          skill: 'manual',
          schema_version: 2,
        }),
      },
    ]);
    await expect(
      db.pool.query(`UPDATE platform.artifact_event SET op = 'x' WHERE artifact_id = $1`, [a.artifact_id]),
    ).rejects.toThrow(/append-only/);
    await expect(
      db.pool.query('DELETE FROM platform.artifact_event WHERE artifact_id = $1', [a.artifact_id]),
    ).rejects.toThrow(/append-only/);
  });

  it('refuses invalid input as a tool error and writes nothing', async () => {
    const args = proposal({ metrics: [{ name: 'revenue', value: 'lots', source_file: 'x', location: 'y' }] });
    const r = await mcp.call('propose_deal_closure', args);
    expect(r.isError).toBe(true);
    expect(await count('deal_artifacts', args.deal_id as string)).toBe(0);
  });
});

describe('cross-source conflicts (check 19)', () => {
  it('records a gap above 10 % in the audit log and shows it in the conflict view', async () => {
    const args = proposal({
      metrics: [
        { name: 'revenue', value: 100, source_file: 'cim.pdf', location: 'p. 3' },
        { name: 'revenue', value: 112, source_file: 'model.xlsx', location: 'P&L!B4' },
        { name: 'ebitda', value: 20, source_file: 'cim.pdf', location: 'p. 4' },
        { name: 'ebitda', value: 21.5, source_file: 'model.xlsx', location: 'P&L!B9' },
      ],
    });
    const out = toolJson(await mcp.call('propose_deal_closure', args));
    expect(out.conflicts).toEqual([{ metric: 'revenue', relative_gap: expect.closeTo(12 / 112, 10) }]);

    const view = toolJson(await mcp.call('get_conflicts', { deal_id: args.deal_id }));
    expect(view).toEqual({
      deal_id: args.deal_id,
      conflicts: [
        {
          metric: 'revenue',
          artifact_id: out.artifact_id,
          min: 100,
          max: 112,
          relative_gap: expect.closeTo(12 / 112, 10),
          values: [
            { value: 100, source_file: 'cim.pdf', location: 'p. 3' },
            { value: 112, source_file: 'model.xlsx', location: 'P&L!B4' },
          ],
          recorded_at: expect.any(String),
        },
      ],
    });
    const ev = await db.pool.query(
      `SELECT detail FROM platform.artifact_event WHERE artifact_id = $1 AND op = 'propose'`,
      [out.artifact_id],
    );
    expect(ev.rows[0].detail.conflicts).toEqual([
      { metric: 'revenue', min: 100, max: 112, relative_gap: expect.closeTo(12 / 112, 10) },
    ]);
    // Both values stay in the artifact: nothing was resolved to one of them.
    const art = await db.pool.query('SELECT body FROM platform.deal_artifacts WHERE artifact_id = $1', [
      out.artifact_id,
    ]);
    expect(art.rows[0].body.metrics.filter((m: { name: string }) => m.name === 'revenue')).toHaveLength(2);
  });

  it('a gap of 10 % or less is no conflict', async () => {
    const args = proposal({
      metrics: [
        { name: 'revenue', value: 100, source_file: 'a', location: '1' },
        { name: 'revenue', value: 111, source_file: 'b', location: '2' },
      ],
    });
    expect(toolJson(await mcp.call('propose_deal_closure', args)).conflicts).toEqual([]);
    expect(toolJson(await mcp.call('get_conflicts', { deal_id: args.deal_id })).conflicts).toEqual([]);
  });
});

describe('citations (check 18)', () => {
  it('counts durable and fragile citations, lists every fragile one, and checks the round trip', async () => {
    const revenue = 0.1 + 0.2; // 0.30000000000000004: must come back bit-exact
    const args = proposal({
      metrics: [
        { name: 'revenue', value: revenue, source_file: 'cim.pdf', location: 'p. 1' },
        { name: 'margin', value: 1000, source_file: 'model.xlsx', location: 'B2' },
      ],
      citations: [
        {
          anchor_type: 'content_hash',
          anchor: 'sha256:aa',
          source_file: 'cim.pdf',
          metric: 'revenue',
          value: revenue,
        },
        { anchor_type: 'file_id', anchor: 'drive:123', metric: 'margin', value: 1000 * (1 + 0.000009) }, // within 0.001 %
        { anchor_type: 'journal_id', anchor: 'JE-77', metric: 'margin', value: 1000 * (1 + 0.00002) }, // outside
        { anchor_type: 'page', anchor: '12', source_file: 'cim.pdf' },
        'revenue was 0.3 per the CIM',
      ],
    });
    const { artifact_id } = toolJson(await mcp.call('propose_deal_closure', args));
    const status = toolJson(await mcp.call('citation_status', { deal_id: args.deal_id }));
    expect(status).toMatchObject({
      deal_id: args.deal_id,
      artifacts: 1,
      total: 5,
      durable: 3,
      fragile: 2,
      fragile_rate: 0.4,
      round_trip: { checked: 3, reproduced: 2, failed: 1, unchecked: 2, durable_reproduced_rate: 2 / 3 },
      unreadable_artifacts: [],
    });
    expect(status.fragile_citations).toEqual([
      { artifact_id, anchor_type: 'page', anchor: '12', source_file: 'cim.pdf' },
      { artifact_id, anchor_type: 'text', anchor: 'revenue was 0.3 per the CIM' },
    ]);
    expect(status.round_trip_failures).toEqual([
      expect.objectContaining({
        anchor_type: 'journal_id',
        metric: 'margin',
        stored: 1000,
        reason: expect.stringMatching(/0\.001 %/),
      }),
    ]);
    const stored = await db.pool.query(
      `SELECT body->'metrics'->0->>'value' AS v FROM platform.deal_artifacts WHERE artifact_id = $1`,
      [artifact_id],
    );
    expect(Number(stored.rows[0].v)).toBe(revenue);
  });
});

describe('schema evolution (check 21)', () => {
  it('reads artifacts written under schema_version 1 after the version was raised', async () => {
    const dealId = `deal-${randomUUID()}`;
    const legacy = randomUUID();
    // A row as the version-1 writer left it: no schema_version or skill given (column defaults), text citations.
    await db.pool.query(
      `INSERT INTO platform.deal_artifacts (artifact_id, deal_id, body, created_by) VALUES ($1, $2, $3, 'old@example.com')`,
      [
        legacy,
        dealId,
        JSON.stringify({
          metrics: [{ name: 'revenue', value: 5, source_file: 'old.pdf', location: 'p. 1' }],
          citations: ['quoted from the old CIM'],
        }),
      ],
    );
    const current = toolJson(await mcp.call('propose_deal_closure', proposal({ deal_id: dealId })));
    const { rows } = await db.pool.query(
      'SELECT artifact_id, schema_version, skill FROM platform.deal_artifacts WHERE deal_id = $1',
      [dealId],
    );
    expect(rows).toEqual(
      expect.arrayContaining([
        { artifact_id: legacy, schema_version: 1, skill: 'manual' },
        { artifact_id: current.artifact_id, schema_version: 2, skill: 'manual' },
      ]),
    );
    const status = toolJson(await mcp.call('citation_status', { deal_id: dealId }));
    expect(status).toMatchObject({
      artifacts: 2,
      total: 2,
      durable: 1,
      fragile: 1,
      unreadable_artifacts: [],
    });
    expect(status.fragile_citations).toEqual([
      { artifact_id: legacy, anchor_type: 'text', anchor: 'quoted from the old CIM' },
    ]);
  });

  it('reports an artifact it cannot read instead of failing the whole board', async () => {
    const dealId = `deal-${randomUUID()}`;
    const future = randomUUID();
    await db.pool.query(
      `INSERT INTO platform.deal_artifacts (artifact_id, deal_id, schema_version, body, created_by) VALUES ($1, $2, 99, '{}', 'x@example.com')`,
      [future, dealId],
    );
    await mcp.call('propose_deal_closure', proposal({ deal_id: dealId }));
    const status = toolJson(await mcp.call('citation_status', { deal_id: dealId }));
    expect(status).toMatchObject({ artifacts: 2, total: 1, durable: 1 });
    expect(status.unreadable_artifacts).toEqual([
      { artifact_id: future, schema_version: 99, reason: 'no reader for schema_version 99' },
    ]);
    expect(
      server.logs().some((l) => l.msg === 'artifact deserialization failed' && l.artifactId === future),
    ).toBe(true);
  });
});

describe('database down (check 20)', () => {
  it('every tool degrades to a database_unavailable tool error; the server stays up and recovers', async () => {
    const args = proposal();
    await relay.down();
    try {
      for (const [name, a] of [
        ['propose_deal_closure', args],
        ['get_conflicts', { deal_id: args.deal_id }],
        ['citation_status', { deal_id: args.deal_id }],
      ] as const) {
        const r = await mcp.call(name, a);
        expect(r.isError).toBe(true);
        expect(toolJson(r)).toMatchObject({ error: { code: 'database_unavailable', status: 503 } });
      }
      const health = await fetch(`${server.url}/deals/health`);
      expect(health.status).toBe(200);
    } finally {
      await relay.up();
    }
    expect(toolJson(await mcp.call('propose_deal_closure', args)).was_inserted).toBe(true);
  });
});
