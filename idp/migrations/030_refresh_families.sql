-- Revocation wins every race (docs/idp.md § Revocation): a sign-in (refresh-token family) is one row. A refresh
-- token is valid only while its family row is not revoked; a rotation locks that row (FOR SHARE) in the same
-- statement that checks it, and every revocation updates it, so the two are ordered by the row lock.
CREATE TABLE platform.refresh_families (
  id uuid PRIMARY KEY,
  user_id text NOT NULL,
  subject text NOT NULL,
  email text NOT NULL,                       -- lowercased, at sign-in
  client_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz,
  revoked_reason text
);
CREATE INDEX refresh_families_email ON platform.refresh_families (email) WHERE revoked_at IS NULL;
CREATE INDEX refresh_families_user ON platform.refresh_families (user_id) WHERE revoked_at IS NULL;
CREATE INDEX refresh_families_subject ON platform.refresh_families (subject) WHERE revoked_at IS NULL;

-- Every existing family, from its tokens: revoked when none of its tokens is current any more (each was
-- revoked or rotated out), at the latest revocation; the first token's user, subject, email and client.
INSERT INTO platform.refresh_families (id, user_id, subject, email, client_id, created_at, revoked_at, revoked_reason)
SELECT family_id,
       (array_agg(user_id ORDER BY created_at))[1],
       (array_agg(subject ORDER BY created_at))[1],
       (array_agg(email ORDER BY created_at))[1],
       (array_agg(client_id ORDER BY created_at))[1],
       min(created_at),
       CASE WHEN bool_or(revoked_at IS NULL AND rotated_to IS NULL) THEN NULL
            ELSE COALESCE(max(revoked_at), now()) END,
       CASE WHEN bool_or(revoked_at IS NULL AND rotated_to IS NULL) THEN NULL
            ELSE (array_agg(revoked_reason ORDER BY revoked_at DESC NULLS LAST))[1] END
  FROM platform.refresh_tokens
 GROUP BY family_id;

-- The access tokens of a family (a revoked sign-in denies its live access tokens by jti). NULL for rows
-- written before this migration and for grants without a family.
ALTER TABLE platform.issuance_audit ADD COLUMN family_id uuid;
CREATE INDEX issuance_audit_family ON platform.issuance_audit (family_id, expires_at) WHERE family_id IS NOT NULL;

-- Device codes approved but not yet exchanged are consumed by revoke-user and block, like authorization codes.
ALTER TABLE platform.device_codes ADD COLUMN revoked_at timestamptz;
CREATE INDEX device_codes_email_open ON platform.device_codes (email) WHERE consumed_at IS NULL AND email IS NOT NULL;

-- Blocked users (platform admin block / unblock): no code, device approval, refresh or userinfo answer while
-- a row exists. Blocking and unblocking are recorded in the admin audit.
CREATE TABLE platform.user_blocks (
  email text PRIMARY KEY,                    -- lowercased
  blocked_by text NOT NULL,                  -- 'admin:<email>'
  blocked_at timestamptz NOT NULL DEFAULT now()
);
