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

-- The schema and every object in it belong to the migrating role (an installation that migrated as another
-- role hands them over here). `platform migrate` runs CREATE SCHEMA IF NOT EXISTS, which needs CREATE on the
-- database even when the schema exists.
CREATE SCHEMA IF NOT EXISTS platform AUTHORIZATION platform_migrate;
ALTER SCHEMA platform OWNER TO platform_migrate;
SELECT format('GRANT CREATE ON DATABASE %I TO platform_migrate', current_database()) \gexec
SELECT format('ALTER TABLE %s OWNER TO platform_migrate', c.oid::regclass)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'platform' AND c.relkind IN ('r', 'p', 'v', 'm')
   AND c.relowner <> 'platform_migrate'::regrole \gexec
SELECT format('ALTER FUNCTION %s OWNER TO platform_migrate', p.oid::regprocedure)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'platform' AND p.proowner <> 'platform_migrate'::regrole \gexec

-- Nobody but the owner creates anything in the schema.
REVOKE ALL ON SCHEMA platform FROM PUBLIC;
GRANT USAGE ON SCHEMA platform TO platform_idp, platform_tools;

-- The IdP: every table of the schema, today's and those later migrations create (default privileges of the
-- migrating role). The tool servers' tables are among them: the IdP holds the signing key, so they give it
-- nothing it does not have.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA platform TO platform_idp;
ALTER DEFAULT PRIVILEGES FOR ROLE platform_migrate IN SCHEMA platform
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO platform_idp;

-- The tool servers: nothing in the schema but their own tables, which the tool migrations list in
-- platform.grant_tool_tables() (tools/migrations/060_tool_grants.sql; each migration that adds a table
-- updates it and grants to platform_tools itself). Before the first migration it does not exist yet.
REVOKE ALL ON ALL TABLES IN SCHEMA platform FROM platform_tools;
SELECT to_regprocedure('platform.grant_tool_tables(name)') IS NOT NULL AS have_tool_grants \gset
\if :have_tool_grants
  SELECT platform.grant_tool_tables('platform_tools');
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
