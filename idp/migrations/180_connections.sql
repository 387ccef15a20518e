-- Connections (docs/connections.md): each user's grant at an upstream authorization server, one row per user
-- and connection. The tokens are kept only in `sealed` (AES-256-GCM under a key derived from
-- PLATFORM_CONNECTIONS_KEY or the key-rotation encryption key, with the user id and connection name as the
-- additional authenticated data: a sealed grant copied to another row does not open). The plain columns are
-- what listings show; decisions (expiry, which token) read the sealed copy.
CREATE TABLE IF NOT EXISTS platform.connection_grants (
  user_id text NOT NULL,
  connection text NOT NULL,
  email text NOT NULL,
  sealed bytea NOT NULL,
  scope text,
  upstream_subject text,
  expires_at timestamptz,
  connected_at timestamptz NOT NULL DEFAULT now(),
  refreshed_at timestamptz,
  PRIMARY KEY (user_id, connection)
);
CREATE INDEX IF NOT EXISTS connection_grants_email ON platform.connection_grants (email);

-- The issuance audit names the connection of a connect, refresh, disconnect or exchange row (NULL otherwise).
ALTER TABLE platform.issuance_audit ADD COLUMN IF NOT EXISTS connection text;

-- A connect flow in progress (GET /connections/<name> until its callback): the state's SHA-256 (the state itself is
-- only in the browser's round trip), the web session it is bound to (its hash), the PKCE verifier and where to go
-- afterwards. Taken once by the callback (DELETE … RETURNING); rows past expires_at are never taken.
CREATE TABLE IF NOT EXISTS platform.connection_states (
  state_hash text PRIMARY KEY,
  session_hash text NOT NULL,
  user_id text NOT NULL,
  connection text NOT NULL,
  code_verifier text NOT NULL,
  return_to text,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS connection_states_expires_at ON platform.connection_states (expires_at);

-- An `entra` connection the user (or an administrator) disconnected: the SHA-256 of the Auth.js refresh token
-- the web sign-in held then, which is not redeemed again; the user's next sign-in leaves a new one.
CREATE TABLE IF NOT EXISTS platform.connection_declines (
  user_id text NOT NULL,
  connection text NOT NULL,
  account_token_hash text NOT NULL,
  declined_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, connection)
);
