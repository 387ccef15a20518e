-- The tool servers' database role (docs/deploy.md § Database roles): they read and write their own tables and
-- nothing else of the platform schema. The list lives in this one function, so deploy/postgres/roles.sql (run
-- by an operator, before or after the migrations) and the migrations grant the same tables; a migration that
-- adds a tool table replaces the function with the longer list and calls it as below.
CREATE OR REPLACE FUNCTION platform.grant_tool_tables(grantee name) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format(
    'GRANT SELECT, INSERT, UPDATE, DELETE ON platform.mail_outbox, platform.deal_artifacts, '
    'platform.idempotency_keys, platform.metric_conflicts, platform.artifact_event TO %I', grantee);
END $$;
REVOKE ALL ON FUNCTION platform.grant_tool_tables(name) FROM PUBLIC;

-- The role exists where the deployment created it (roles.sql); elsewhere (a single-role database) nothing to do.
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'platform_tools') THEN
    PERFORM platform.grant_tool_tables('platform_tools');
  END IF;
END $$;
