#!/usr/bin/env bash
# The official postgres image's entrypoint contract, for Debian's packages: as root it fixes the data
# directory's owner and re-runs itself as postgres; a new (empty) PGDATA is initialised with
# POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB and /docker-entrypoint-initdb.d/*.sh|*.sql; an
# existing cluster is started as it is.
# From 18 on, a mount at /var/lib/postgresql/data (where up to 17 kept the cluster) is refused: the
# cluster lives in PGDATA under /var/lib/postgresql, and data in the old place would go unused.
set -Eeuo pipefail
if [ "${1:-}" = postgres ] && [ "${PG_MAJOR:-0}" -ge 18 ] && mountpoint -q /var/lib/postgresql/data 2>/dev/null; then
    echo "Error: in 18+, the cluster is kept in PGDATA=$PGDATA under the volume /var/lib/postgresql, but" \
         "/var/lib/postgresql/data is a mount of its own (the layout up to 17): its data would go unused." \
         "Mount the volume at /var/lib/postgresql instead, and move an old cluster across with a dump." >&2
    exit 1
fi
if [ "${1:-}" = postgres ] && [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA"
    chown -R postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?the database is uninitialized and POSTGRES_PASSWORD is not set}"
    user=${POSTGRES_USER:-postgres}
    db=${POSTGRES_DB:-$user}
    initdb --username="$user" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") --auth-local=trust --auth-host=scram-sha-256 \
        -D "$PGDATA" >/dev/null
    printf "host all all all scram-sha-256\n" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start >/dev/null
    if [ "$db" != postgres ]; then
        psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d postgres -q \
            -c "CREATE DATABASE \"$(printf '%s' "$db" | sed 's/"/""/g')\""
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sh) echo "running $f"; . "$f" ;;
            *.sql) echo "running $f"; psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d "$db" -q -f "$f" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "PostgreSQL init process complete; ready for start up."
fi
if [ "${1:-}" = postgres ]; then
    exec postgres -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "${@:2}"
fi
exec "$@"
