-- The console (/admin) and the audit at scale: refusals recorded beside issuances, and indexes so that every
-- audit page, filtered or not, and the per-hour chart read an index in the feed's order (newest first) and
-- stop after one page, however many rows there are.

-- Refusals (docs/console.md § What counts as a refusal): a grant the token endpoint refused for a reason about
-- the grant itself (invalid_grant, invalid_scope, a managed user left with none of the services asked for),
-- a user's "Deny" on the consent page, a user's "Deny" on the device page. Malformed requests, unknown
-- clients, rate limits and a device client's polling (authorization_pending, slow_down) are not refusals.
CREATE TABLE platform.refusal_audit (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  source text NOT NULL CHECK (source IN ('token', 'consent', 'device')),
  error text NOT NULL,                       -- the OAuth error answered: invalid_grant, access_denied, ...
  reason text NOT NULL,                      -- its description, as answered
  email text,                                -- lowercased; NULL when the refused grant names no known user
  subject text,
  client_id text,
  grant_type text,
  request_id text
);
CREATE INDEX refusal_audit_at ON platform.refusal_audit (at, id);
CREATE INDEX refusal_audit_email ON platform.refusal_audit (email, at, id) WHERE email IS NOT NULL;
CREATE INDEX refusal_audit_client ON platform.refusal_audit (client_id, at, id) WHERE client_id IS NOT NULL;

CREATE FUNCTION platform.refusal_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'refusal_audit is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER refusal_audit_no_update BEFORE UPDATE OR DELETE ON platform.refusal_audit
  FOR EACH ROW EXECUTE FUNCTION platform.refusal_audit_append_only();
CREATE TRIGGER refusal_audit_no_truncate BEFORE TRUNCATE ON platform.refusal_audit
  FOR EACH STATEMENT EXECUTE FUNCTION platform.refusal_audit_append_only();

-- The feed's order is (time, id) descending: each filter gets an index that ends in it, so a page is an index
-- range read backwards and a LIMIT, with no sort of every matching row.
CREATE INDEX issuance_audit_at_id ON platform.issuance_audit (issued_at, id);
CREATE INDEX issuance_audit_email_at_id ON platform.issuance_audit (email, issued_at, id);
CREATE INDEX issuance_audit_client_at_id ON platform.issuance_audit (client_id, issued_at, id);
-- The service filter: scope is a space-separated list; its words as an array, searched by containment
-- (scope_words @> '{mcp:mail}'), match exactly the word, never a prefix of another service's name.
CREATE INDEX issuance_audit_scope_words ON platform.issuance_audit USING gin (string_to_array(scope, ' '));
DROP INDEX IF EXISTS platform.issuance_audit_email;          -- superseded by issuance_audit_email_at_id
DROP INDEX IF EXISTS platform.issuance_audit_issued_at;      -- superseded by issuance_audit_at_id

CREATE INDEX admin_audit_at_id ON platform.admin_audit (at, id);
CREATE INDEX admin_audit_actor_at_id ON platform.admin_audit (actor_email, at, id);
-- The user an administrative action concerns (revoke-user, a grant to an email, a revoked sign-in, a withdrawn
-- consent, a user read), so that the audit of one user lists what was done to them whatever the action's
-- target says (`deals:ana@example.com`, a sign-in id). Rows written before this column are given it from their
-- target where the target names the user: the append-only trigger is held for that one derived fill, nothing
-- recorded is changed.
ALTER TABLE platform.admin_audit ADD COLUMN target_email text;
ALTER TABLE platform.admin_audit DISABLE TRIGGER admin_audit_no_update;
UPDATE platform.admin_audit
   SET target_email = lower(CASE WHEN action IN ('grant', 'ungrant') THEN split_part(target, ':', 2) ELSE target END)
 WHERE target LIKE '%@%' AND action IN ('revoke-user', 'read-user', 'withdraw-consent', 'entitlements', 'grant', 'ungrant');
UPDATE platform.admin_audit SET target_email = lower(detail->>'email')
 WHERE action = 'revoke-sign-in' AND detail ? 'email';
ALTER TABLE platform.admin_audit ENABLE TRIGGER admin_audit_no_update;
CREATE INDEX admin_audit_target_email_at_id ON platform.admin_audit (target_email, at, id)
  WHERE target_email IS NOT NULL;
CREATE INDEX admin_audit_client_at_id ON platform.admin_audit (actor_client_id, at, id);
DROP INDEX IF EXISTS platform.admin_audit_at;
DROP INDEX IF EXISTS platform.admin_audit_actor;
