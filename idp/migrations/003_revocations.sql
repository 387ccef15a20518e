-- Durable revocations and the administrative audit.
--
-- Every revocation the provider makes is recorded here first and then written to Redis. Redis is a fast
-- copy the gateways read; this table is the record. At start-up and whenever the provider's Redis
-- connection comes back, the rows still live (expires_at in the future) are written to Redis again, so a
-- Redis emptied or restarted loses none.
CREATE TABLE platform.revocations (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('jti', 'sub', 'email')),
  value text NOT NULL,                       -- jti and email lowercased; sub as issued
  cutoff bigint,                             -- sub/email: tokens with iat <= cutoff are revoked; jti: NULL
  known boolean,                             -- jti: whether this provider issued a token with it
  expires_at timestamptz NOT NULL,           -- after this no token can match (jti: its exp; cut-offs: +3600 s)
  revoked_by text NOT NULL,                  -- who: 'admin:<email>', 'client:<client_id>', ...
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX revocations_lookup ON platform.revocations (kind, value);
CREATE INDEX revocations_expires_at ON platform.revocations (expires_at);

-- revoke-token looks a jti up in the issuance audit to say whether it was issued here and until when.
CREATE INDEX issuance_audit_jti ON platform.issuance_audit (jti);

-- revoke-user finds a user's grants by email as well as by subject.
CREATE INDEX refresh_tokens_email ON platform.refresh_tokens (email) WHERE revoked_at IS NULL;

-- Codes consumed by revoke-user: redeeming one afterwards is invalid_grant (not a replay).
ALTER TABLE platform.oauth_codes ADD COLUMN revoked_at timestamptz;
CREATE INDEX oauth_codes_email_open ON platform.oauth_codes (email) WHERE consumed_at IS NULL;

-- Every administrative action (admin API and console), append-only like the issuance audit.
CREATE TABLE platform.admin_audit (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  actor_email text NOT NULL,
  actor_sub text NOT NULL,
  actor_client_id text,                      -- the client the admin's token was issued to (NULL: console)
  action text NOT NULL,                      -- e.g. 'revoke-token', 'revoke-user'
  target text,                               -- the jti, email, id ... acted on
  detail jsonb NOT NULL DEFAULT '{}'::jsonb, -- the action's outcome as answered
  request_id text
);
CREATE INDEX admin_audit_at ON platform.admin_audit (at);
CREATE INDEX admin_audit_actor ON platform.admin_audit (actor_email, at);

CREATE FUNCTION platform.admin_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'admin_audit is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER admin_audit_no_update BEFORE UPDATE OR DELETE ON platform.admin_audit
  FOR EACH ROW EXECUTE FUNCTION platform.admin_audit_append_only();
CREATE TRIGGER admin_audit_no_truncate BEFORE TRUNCATE ON platform.admin_audit
  FOR EACH STATEMENT EXECUTE FUNCTION platform.admin_audit_append_only();
