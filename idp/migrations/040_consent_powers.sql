-- The administrative scopes (mail:send_as) a user approved for a client on the consent page, beside the
-- services: a consent names them in words, and asking for one not approved yet shows the page again.
ALTER TABLE platform.oauth_consents ADD COLUMN IF NOT EXISTS scopes text[] NOT NULL DEFAULT '{}';
