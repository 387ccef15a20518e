-- Device authorization grant (RFC 8628). Both codes are stored only as SHA-256 hashes: the device code the
-- device polls with, and the user code a person types on the verification page.
CREATE TABLE platform.device_codes (
  device_code_hash text PRIMARY KEY,
  user_code_hash text NOT NULL UNIQUE,
  client_id text NOT NULL,
  scope text NOT NULL,                       -- as requested (validated); the granted scope is fixed on approval
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied')),
  user_id text,
  subject text,
  email text,
  granted_scope text,
  auth_time bigint,
  family_id uuid NOT NULL,                   -- the refresh-token family the grant starts (reuse revokes it)
  interval_seconds integer NOT NULL,         -- grows by 5 s at every slow_down (RFC 8628 §3.5)
  expires_at timestamptz NOT NULL,
  last_polled_at timestamptz,
  decided_at timestamptz,
  consumed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX device_codes_expires_at ON platform.device_codes (expires_at);
