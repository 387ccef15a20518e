-- The platform's database roles and their grants (docs/deploy.md § Database roles). Run with psql, as a
-- superuser (or a role with CREATEROLE that owns the web application's tables), in the platform's database:
--
--   psql -v ON_ERROR_STOP=1 -v migrate_password=… -v idp_password=… -v tools_password=… -f roles.sql
--
-- Idempotent: run it again after the web application has created its tables (their grants are skipped, with a
-- line saying so, while they are missing), to restore grants that drifted, or with new passwords. A password
-- variable left out leaves that role's password as it is. The web application's table names default to the
-- components' own defaults; pass -v users_table=… (accounts_table, sessions_table) when
-- PLATFORM_AUTHJS_*_TABLE name others.
--
--   platform_migrate  owns the `platform` schema and everything in it: only `platform migrate` uses it
--   platform_idp      reads and writes the platform schema's tables; reads users, accounts, sessions
--   platform_tools    reads and writes the tool servers' tables only; reads users; nothing else
\set ON_ERROR_STOP on
\if :{?users_table}
\else
  \set users_table users
\endif
\if :{?accounts_table}
\else
  \set accounts_table accounts
\endif
\if :{?sessions_table}
\else
  \set sessions_table sessions
\endif

SELECT format('CREATE ROLE %I LOGIN', r)
  FROM unnest(ARRAY['platform_migrate', 'platform_idp', 'platform_tools']) AS r
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) \gexec
ALTER ROLE platform_migrate LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE platform_idp LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE platform_tools LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
\if :{?migrate_password}
  ALTER ROLE platform_migrate PASSWORD :'migrate_password';
\endif
\if :{?idp_password}
  ALTER ROLE platform_idp PASSWORD :'idp_password';
\endif
\if :{?tools_password}
  ALTER ROLE platform_tools PASSWORD :'tools_password';
\endif

-- `platform migrate` creates the schema (CREATE SCHEMA IF NOT EXISTS needs CREATE on the database, even when
-- the schema exists) and so owns it and everything in it. What it creates later gets these grants by default:
-- USAGE on the schema for both servers, and every table for the IdP (the tool servers' tables are among them:
-- the IdP holds the signing key, so they give it nothing it does not have). The schema is deliberately not
-- created here: the bundled superuser is called `platform`, and a `platform` schema made before the web
-- application's tables would catch them (search_path starts with "$user").
SELECT format('GRANT CREATE ON DATABASE %I TO platform_migrate', current_database()) \gexec
ALTER DEFAULT PRIVILEGES FOR ROLE platform_migrate GRANT USAGE ON SCHEMAS TO platform_idp, platform_tools;
ALTER DEFAULT PRIVILEGES FOR ROLE platform_migrate
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO platform_idp;

-- A schema that exists already (this script run after the migrations, or an installation that migrated as
-- another role): handed to the migrating role with everything in it, and granted as above.
SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'platform') AS have_schema \gset
\if :have_schema
  ALTER SCHEMA platform OWNER TO platform_migrate;
  SELECT format('ALTER TABLE %s OWNER TO platform_migrate', c.oid::regclass)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = 'platform' AND c.relkind IN ('r', 'p', 'v', 'm')
     AND c.relowner <> 'platform_migrate'::regrole \gexec
  SELECT format('ALTER FUNCTION %s OWNER TO platform_migrate', p.oid::regprocedure)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname = 'platform' AND p.proowner <> 'platform_migrate'::regrole \gexec
  -- Nobody but the owner creates anything in it.
  REVOKE ALL ON SCHEMA platform FROM PUBLIC;
  GRANT USAGE ON SCHEMA platform TO platform_idp, platform_tools;
  GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA platform TO platform_idp;
  -- The tool servers: nothing in the schema but their own tables, which the tool migrations list in
  -- platform.grant_tool_tables() (tools/migrations/060_tool_grants.sql; a migration that adds a tool table
  -- updates it and grants to platform_tools itself).
  REVOKE ALL ON ALL TABLES IN SCHEMA platform FROM platform_tools;
  SELECT to_regprocedure('platform.grant_tool_tables(name)') IS NOT NULL AS have_tool_grants \gset
  \if :have_tool_grants
    SELECT platform.grant_tool_tables('platform_tools');
  \endif
\endif

-- The web application's tables (it owns them): the IdP reads the three, the tool servers `users` only.
SELECT to_regclass(:'users_table') IS NOT NULL AS have_users,
       to_regclass(:'accounts_table') IS NOT NULL AS have_accounts,
       to_regclass(:'sessions_table') IS NOT NULL AS have_sessions \gset
\if :have_users
  GRANT SELECT ON :users_table TO platform_idp, platform_tools;
\else
  \echo 'roles.sql: no table' :users_table 'yet: run this again once the web application has created it'
\endif
\if :have_accounts
  GRANT SELECT ON :accounts_table TO platform_idp;
  REVOKE ALL ON :accounts_table FROM platform_tools;
\else
  \echo 'roles.sql: no table' :accounts_table 'yet: run this again once the web application has created it'
\endif
\if :have_sessions
  GRANT SELECT ON :sessions_table TO platform_idp;
  REVOKE ALL ON :sessions_table FROM platform_tools;
\else
  \echo 'roles.sql: no table' :sessions_table 'yet: run this again once the web application has created it'
\endif
