// The audit at 100 000 rows: every page the console and the admin API read, and the per-hour chart, use indexes
// (no sequential scan of an audit table), as planned by Postgres for the statement the IdP sends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_QUERY, type AuditFilter, auditParams } from '../../idp/store/audit.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

let db: TestDatabase;

/** Issuances, refusals and admin actions over 30 days: 100 000 rows, 2000 users, 50 clients, 5 services. */
export const SEED_AUDIT = [
  `INSERT INTO platform.issuance_audit (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at)
   SELECT now() - random() * interval '30 days', gen_random_uuid(),
          (ARRAY['authorization_code','refresh_token','refresh_token','refresh_token'])[1 + g % 4],
          'u' || (g % 2000), 's' || (g % 2000), 'user' || (g % 2000) || '@example.com',
          CASE WHEN g % 10 = 0 THEN 'https://c' || (g % 7) || '.example.com/client.json' ELSE 'client-' || (g % 43) END,
          'openid email mcp:' || (ARRAY['platform','mail','deals','calendar','crm'])[1 + g % 5]
            || CASE WHEN g % 3 = 0 THEN ' mcp:' || (ARRAY['mail','deals','calendar','crm','platform'])[1 + g % 5] ELSE '' END,
          now() + interval '1 hour'
     FROM generate_series(1, 94000) g`,
  `INSERT INTO platform.refusal_audit (at, source, error, reason, email, subject, client_id, grant_type)
   SELECT now() - random() * interval '30 days', (ARRAY['token','consent','device'])[1 + g % 3],
          (ARRAY['invalid_grant','access_denied','invalid_scope'])[1 + g % 3], 'seeded',
          'user' || (g % 2000) || '@example.com', 's' || (g % 2000), 'client-' || (g % 43), 'refresh_token'
     FROM generate_series(1, 5000) g`,
  `INSERT INTO platform.admin_audit (at, actor_email, actor_sub, actor_client_id, action, target, detail)
   SELECT now() - random() * interval '30 days', 'admin' || (g % 3) || '@example.com', 'a' || (g % 3),
          CASE WHEN g % 2 = 0 THEN 'platform-cli' ELSE 'admin-console' END,
          (ARRAY['read-audit','revoke-user','grant','read-user'])[1 + g % 4], 'user' || (g % 2000) || '@example.com', '{}'
     FROM generate_series(1, 1000) g`,
  'ANALYZE platform.issuance_audit',
  'ANALYZE platform.refusal_audit',
  'ANALYZE platform.admin_audit',
];

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
