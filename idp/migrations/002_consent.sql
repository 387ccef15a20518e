-- Consent (one row per user and client): which services the user approved for the client. Keyed by the
-- user's lowercased email, the identity the platform vouches for and the one administrators look users up by.
-- client_name is the name shown on the page when the user approved, kept so the list still reads after the
-- client itself is gone (or, for a metadata-document client, was never a row of oauth_clients).
CREATE TABLE platform.oauth_consents (
  email text NOT NULL,
  client_id text NOT NULL,
  client_name text NOT NULL DEFAULT '',
  services text[] NOT NULL DEFAULT '{}',
  granted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (email, client_id)
);
CREATE INDEX oauth_consents_client ON platform.oauth_consents (client_id);
