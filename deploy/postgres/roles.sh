#!/bin/sh
# The bundled Postgres's database roles (deploy/postgres/roles.sql) with the passwords compose hands this
# container. The image runs it once, at the first start of an empty data directory; run it again with
#   docker compose exec postgres /docker-entrypoint-initdb.d/10-platform-roles.sh
# after the web application has created its tables, or after changing a PLATFORM_*_DB_PASSWORD.
# Each password may instead be a file (PLATFORM_*_DB_PASSWORD_FILE, Docker Swarm secrets: deploy/stack.postgres.yaml).
for name in PLATFORM_MIGRATE_DB_PASSWORD PLATFORM_IDP_DB_PASSWORD PLATFORM_TOOLS_DB_PASSWORD; do
  file=$(eval "printf %s \"\${${name}_FILE:-}\"")
  if [ -n "$file" ]; then
    eval "$name=\$(cat \"\$file\")"
  fi
done
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v migrate_password="$PLATFORM_MIGRATE_DB_PASSWORD" \
  -v idp_password="$PLATFORM_IDP_DB_PASSWORD" \
  -v tools_password="$PLATFORM_TOOLS_DB_PASSWORD" \
  -f /etc/platform/postgres/roles.sql
