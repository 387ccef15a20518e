-- Entity grants: `read` or `write` on an entity key (e.g. `deal:42`), granted to an email or to a role of the
-- web application (PLATFORM_ROLES_SQL). Carried in the access token's `ent` claim; the history of every grant
-- and ungrant, with who made it, is kept append-only beside it.

CREATE TABLE platform.entity_grants (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  entity text NOT NULL,
  permission text NOT NULL CHECK (permission IN ('read', 'write')),
  email text,                                -- lowercased
  role text,
  granted_by text NOT NULL,
  granted_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((email IS NULL) <> (role IS NULL)),
  CHECK (email IS NULL OR email = lower(email))
);
CREATE UNIQUE INDEX entity_grants_email ON platform.entity_grants (email, entity, permission) WHERE email IS NOT NULL;
CREATE UNIQUE INDEX entity_grants_role ON platform.entity_grants (role, entity, permission) WHERE role IS NOT NULL;

CREATE TABLE platform.entity_grant_changes (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  changed_at timestamptz NOT NULL DEFAULT now(),
  action text NOT NULL CHECK (action IN ('grant', 'ungrant')),
  entity text NOT NULL,
  permission text,                           -- ungrant without a permission: both
  email text,
  role text,
  actor text NOT NULL,
  -- ungrant: the subjects whose live tokens were cut off
  subjects text[] NOT NULL DEFAULT '{}'
);
CREATE INDEX entity_grant_changes_email ON platform.entity_grant_changes (email, changed_at) WHERE email IS NOT NULL;

CREATE FUNCTION platform.entity_grant_changes_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'entity_grant_changes is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER entity_grant_changes_no_update BEFORE UPDATE OR DELETE ON platform.entity_grant_changes
  FOR EACH ROW EXECUTE FUNCTION platform.entity_grant_changes_append_only();
CREATE TRIGGER entity_grant_changes_no_truncate BEFORE TRUNCATE ON platform.entity_grant_changes
  FOR EACH STATEMENT EXECUTE FUNCTION platform.entity_grant_changes_append_only();
