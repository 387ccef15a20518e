-- Confidential clients (RFC 7591 registration with a secret or a key set; RFC 7523 private_key_jwt).
-- The secret is stored only as its SHA-256 (base64url): it is 32 random bytes, so a slow hash adds nothing.
ALTER TABLE platform.oauth_clients ADD COLUMN auth_method text NOT NULL DEFAULT 'none';
ALTER TABLE platform.oauth_clients ADD COLUMN secret_hash text;

-- Client assertions (private_key_jwt) already used: each `jti` is accepted once per client, on every replica,
-- until the assertion expires (then the purge removes the row).
CREATE TABLE platform.client_assertion_jtis (
  client_id text NOT NULL,
  jti text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (client_id, jti)
);
CREATE INDEX client_assertion_jtis_expires_at ON platform.client_assertion_jtis (expires_at);
