#!/bin/sh
# First start: an empty data directory gets a cluster whose superuser is $POSTGRES_USER, the database
# $POSTGRES_DB, the init scripts of /docker-entrypoint-initdb.d run, and password authentication from the
# container network (trust when no password is set, as
# the official image does with POSTGRES_HOST_AUTH_METHOD=trust; the suite's stack is on loopback only).
set -eu
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  method=scram-sha-256
  pwfile=""
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then method=trust; else
    pwfile=$(mktemp); printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"; fi
  initdb --username="$user" --auth-local=trust --auth-host="$method" ${pwfile:+--pwfile="$pwfile"} >/dev/null
  [ -n "$pwfile" ] && rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 $method" >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$db" != postgres ]; then createdb --username="$user" "$db"; fi
  # Like the official image: the init scripts mounted in /docker-entrypoint-initdb.d, in name order, against
  # the new database over the local socket (executable .sh run, .sql fed to psql).
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) if [ -x "$f" ]; then "$f"; else . "$f"; fi ;;
      *.sql) psql -v ON_ERROR_STOP=1 --no-psqlrc --username="$user" --dbname="$db" -f "$f" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec "$@" -c listen_addresses='*'
