// The audit at 100 000 rows: every page the console and the admin API read, and the per-hour chart, use indexes
// (no sequential scan of an audit table), as planned by Postgres for the statement the IdP sends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEED_AUDIT } from '../../bench/lib/audit-seed.ts';
import { AUDIT_QUERY, type AuditFilter, auditParams } from '../../idp/store/audit.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  for (const sql of SEED_AUDIT) await db.pool.query(sql);
});

afterAll(async () => {
  await db?.drop();
});

async function plan(sql: string, params: unknown[]): Promise<string> {
  const { rows } = await db.pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params);
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}

const SEQ_SCAN = /Seq Scan on (issuance_audit|refusal_audit|admin_audit)/;

describe('the audit queries at 100 000 rows', () => {
  const day = new Date(Date.now() - 7 * 86400_000);
  const filters: Array<[string, AuditFilter]> = [
    ['the first page', {}],
    ['by email', { email: 'user42@example.com' }],
    ['by client', { clientId: 'client-7' }],
    ['by service', { service: 'deals' }],
    ['by client, service and since', { clientId: 'client-7', service: 'crm', since: day }],
    ['by time range', { since: day, until: new Date(day.getTime() + 86400_000) }],
  ];
  for (const [name, filter] of filters) {
    it(`reads ${name} through indexes`, async () => {
      const p = await plan(AUDIT_QUERY, auditParams(filter, { limit: 50 }));
      expect(p, p).not.toMatch(SEQ_SCAN);
      expect(p).toMatch(/Index/);
    });
  }

  it('reads a later page (after a cursor) through indexes', async () => {
    const p = await plan(
      AUDIT_QUERY,
      auditParams(
        { email: 'user42@example.com' },
        { limit: 50, after: { us: `${BigInt(day.getTime()) * 1000n}`, kind: 'i', id: '500' } },
      ),
    );
    expect(p, p).not.toMatch(SEQ_SCAN);
  });

  it('counts the per-hour chart through indexes', async () => {
    const { PER_HOUR_QUERY } = await import('../../idp/store/refusals.ts');
    const p = await plan(PER_HOUR_QUERY, [48]);
    expect(p, p).not.toMatch(SEQ_SCAN);
    expect(p).toMatch(/Index (Only )?Scan (using|on) issuance_audit_at_id/);
    expect(p).toMatch(/Index (Only )?Scan (using|on) refusal_audit_at/);
  });
});
