-- Signing keys kept by the provider itself when PLATFORM_KEY_ROTATION=auto (docs/idp.md § Signing-key
-- rotation). A key's state follows from its timestamps and the clock, so every replica agrees without a
-- message: published from publish_at, signing from activate_at until a later key activates, published after
-- that until every token it signed has expired; withdrawn_at (an emergency rotation) ends all of it at once.
-- The private key (PKCS8 DER) is sealed with AES-256-GCM under a key derived from PLATFORM_KEY_ENCRYPTION_KEY.
CREATE TABLE platform.rotating_keys (
  kid text PRIMARY KEY,
  alg text NOT NULL DEFAULT 'RS256',
  public_jwk jsonb NOT NULL,
  private_key bytea NOT NULL,
  origin text NOT NULL CHECK (origin IN ('initial', 'imported', 'schedule', 'planned', 'emergency')),
  created_at timestamptz NOT NULL DEFAULT now(),
  publish_at timestamptz NOT NULL,
  activate_at timestamptz NOT NULL,
  withdrawn_at timestamptz,
  -- Set by the replica that wrote the audit row for the key's activation and retirement (each written once).
  activation_logged boolean NOT NULL DEFAULT false,
  retirement_logged boolean NOT NULL DEFAULT false,
  CHECK (activate_at >= publish_at)
);
CREATE INDEX rotating_keys_activate_at ON platform.rotating_keys (activate_at);
