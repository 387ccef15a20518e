-- OpenID Connect login freshness (docs/idp.md § Login freshness). The web application's Auth.js sessions carry no
-- sign-in time, so the provider records, per session, when it first saw it: auth_time. `known` is true when the
-- sign-in was seen happening (the browser came back from the sign-in page the provider sent it to, with a session
-- the provider had not seen); false when the session was simply first seen then (signed in at or before it).
CREATE TABLE platform.web_session_logins (
  session_hash text PRIMARY KEY,             -- SHA-256 (base64url) of the session token; the token is never stored
  auth_time bigint NOT NULL,                 -- unix seconds
  known boolean NOT NULL,
  expires_at timestamptz NOT NULL,           -- the session's expiry as last seen (kept a day past it, then purged)
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_session_logins_expires_at ON platform.web_session_logins (expires_at);

-- The id_token's email_verified: users."emailVerified" IS NOT NULL when the user signed in, carried by the grant.
-- Grants made before this migration say false (unknown is not verified).
ALTER TABLE platform.oauth_codes ADD COLUMN email_verified boolean NOT NULL DEFAULT false;
ALTER TABLE platform.refresh_tokens ADD COLUMN email_verified boolean NOT NULL DEFAULT false;
ALTER TABLE platform.device_codes ADD COLUMN email_verified boolean;
