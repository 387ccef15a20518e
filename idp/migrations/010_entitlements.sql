-- Entitlements (PLATFORM_ENTITLEMENTS=managed): which service a user may get a token for, granted to an
-- email or to a role of the web application (PLATFORM_ROLES_SQL). One row per grant; the history of every
-- grant and ungrant, with who made it, is kept append-only beside it.

CREATE TABLE platform.entitlement_grants (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  service text NOT NULL,
  email text,                                -- lowercased
  role text,
  granted_by text NOT NULL,
  granted_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((email IS NULL) <> (role IS NULL)),
  CHECK (email IS NULL OR email = lower(email))
);
CREATE UNIQUE INDEX entitlement_grants_email ON platform.entitlement_grants (email, service) WHERE email IS NOT NULL;
CREATE UNIQUE INDEX entitlement_grants_role ON platform.entitlement_grants (role, service) WHERE role IS NOT NULL;

CREATE TABLE platform.entitlement_changes (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  changed_at timestamptz NOT NULL DEFAULT now(),
  action text NOT NULL CHECK (action IN ('grant', 'ungrant')),
  service text NOT NULL,
  email text,
  role text,
  actor text NOT NULL,
  -- ungrant: the subjects whose live tokens were cut off
  subjects text[] NOT NULL DEFAULT '{}'
);
CREATE INDEX entitlement_changes_email ON platform.entitlement_changes (email, changed_at) WHERE email IS NOT NULL;

CREATE FUNCTION platform.entitlement_changes_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'entitlement_changes is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER entitlement_changes_no_update BEFORE UPDATE OR DELETE ON platform.entitlement_changes
  FOR EACH ROW EXECUTE FUNCTION platform.entitlement_changes_append_only();
CREATE TRIGGER entitlement_changes_no_truncate BEFORE TRUNCATE ON platform.entitlement_changes
  FOR EACH STATEMENT EXECUTE FUNCTION platform.entitlement_changes_append_only();

-- An ungrant looks for the users holding live access tokens (issued within their one-hour lifetime).
CREATE INDEX IF NOT EXISTS issuance_audit_issued_at ON platform.issuance_audit (issued_at);
