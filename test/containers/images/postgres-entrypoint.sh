#!/bin/sh
# First start: an empty data directory gets a cluster whose superuser is $POSTGRES_USER, the database
# $POSTGRES_DB, and password authentication from the container network (trust when no password is set, as
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
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec "$@" -c listen_addresses='*'
