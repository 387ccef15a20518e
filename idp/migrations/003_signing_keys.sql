-- When each signing key was first published by this provider, for the admin API's key list. Rows are added
-- at start-up for the configured keys (kid, the first time it is seen); a key taken out of the
-- configuration keeps its row, which says when it was published.
CREATE TABLE platform.signing_keys (
  kid text PRIMARY KEY,
  alg text NOT NULL,
  first_published_at timestamptz NOT NULL DEFAULT now()
);
