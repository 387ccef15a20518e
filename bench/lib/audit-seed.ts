// 100 000 audit rows for the query-plan test (test/idp/audit-plans.test.ts) and make bench-audit.
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
  `INSERT INTO platform.admin_audit (at, actor_email, actor_sub, actor_client_id, action, target, target_email, detail)
   SELECT now() - random() * interval '30 days', 'admin' || (g % 3) || '@example.com', 'a' || (g % 3),
          CASE WHEN g % 2 = 0 THEN 'platform-cli' ELSE 'admin-console' END,
          (ARRAY['read-audit','revoke-user','grant','read-user'])[1 + g % 4], 'user' || (g % 2000) || '@example.com',
          'user' || (g % 2000) || '@example.com', '{}'
     FROM generate_series(1, 1000) g`,
  'ANALYZE platform.issuance_audit',
  'ANALYZE platform.refusal_audit',
  'ANALYZE platform.admin_audit',
];
