-- The provider's own records (spec: Stored records). They live in schema `platform`, apart from the web
-- application's Auth.js tables. Codes and refresh tokens are stored only as SHA-256 hashes of their values.

CREATE TABLE platform.oauth_clients (
  client_id text PRIMARY KEY,
  name text NOT NULL DEFAULT '',
  redirect_uris text NOT NULL,               -- JSON array stored as text (spec)
  type text NOT NULL DEFAULT 'public',
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE platform.oauth_codes (
  code text PRIMARY KEY,                     -- SHA-256 (base64url) of the code handed to the client
  client_id text NOT NULL,
  user_id text NOT NULL,
  subject text NOT NULL,
  email text NOT NULL,
  code_challenge text NOT NULL,
  redirect_uri text NOT NULL,
  scope text NOT NULL,
  nonce text,
  family_id uuid NOT NULL,                   -- the refresh-token family this code starts (replay revokes it)
  auth_time bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  consumed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_codes_expires_at ON platform.oauth_codes (expires_at);

CREATE TABLE platform.refresh_tokens (
  id uuid PRIMARY KEY,
  token_hash text NOT NULL UNIQUE,           -- SHA-256 (base64url); the plaintext is never stored
  family_id uuid NOT NULL,
  user_id text NOT NULL,
  subject text NOT NULL,
  email text NOT NULL,
  client_id text NOT NULL,
  scope text NOT NULL,
  auth_time bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz,
  revoked_reason text,
  rotated_to uuid,
  rotated_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refresh_tokens_family ON platform.refresh_tokens (family_id);
CREATE INDEX refresh_tokens_user ON platform.refresh_tokens (user_id) WHERE revoked_at IS NULL;
CREATE INDEX refresh_tokens_subject ON platform.refresh_tokens (subject) WHERE revoked_at IS NULL;

-- Append-only issuance audit: who, when, client, scope, jti.
CREATE TABLE platform.issuance_audit (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  issued_at timestamptz NOT NULL,
  jti uuid NOT NULL,
  grant_type text NOT NULL,
  user_id text NOT NULL,
  subject text NOT NULL,
  email text NOT NULL,
  client_id text NOT NULL,
  scope text NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX issuance_audit_email ON platform.issuance_audit (email, issued_at);

-- Enforced in the database, not just by convention: whatever role the application connects as, an UPDATE,
-- DELETE or TRUNCATE of an audit row fails.
CREATE FUNCTION platform.issuance_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'issuance_audit is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER issuance_audit_no_update BEFORE UPDATE OR DELETE ON platform.issuance_audit
  FOR EACH ROW EXECUTE FUNCTION platform.issuance_audit_append_only();
CREATE TRIGGER issuance_audit_no_truncate BEFORE TRUNCATE ON platform.issuance_audit
  FOR EACH STATEMENT EXECUTE FUNCTION platform.issuance_audit_append_only();

-- The first-party command-line client (spec: pre-registered statically). Loopback redirect URIs match on
-- any port (RFC 8252 §7.3), so the stored list names the patterns.
INSERT INTO platform.oauth_clients (client_id, name, redirect_uris, type)
VALUES ('platform-cli', 'platform command-line client',
        '["http://127.0.0.1/callback","http://localhost/callback"]', 'public')
ON CONFLICT (client_id) DO NOTHING;
