# Functions for a private PostgreSQL cluster (sourced by script/server, script/test, script/bench).
# The cluster lives in one folder: data, log and unix socket. No TCP port is opened. As root, the
# server runs as the `postgres` OS user, because PostgreSQL refuses to run as root.

pg_bindir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -z "$dir" ] || [ ! -x "$dir/pg_ctl" ]; then
        echo "PostgreSQL server binaries not found (Debian package: postgresql)" >&2
        return 1
    fi
    echo "$dir"
}

# Runs a command as the cluster's owner: postgres when we are root, ourselves otherwise.
pg_as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# pg_start DIR: creates the cluster in DIR if needed, starts it if stopped, creates the
# virtual_tourist database, and prints its URL. PG_SETTINGS adds server settings when it starts,
# e.g. "-c shared_preload_libraries=pg_stat_statements" (script/bench albums).
pg_start() {
    local dir="$1" bin
    bin=$(pg_bindir) || return 1
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$(id -u)" = 0 ]; then
        chown postgres:postgres "$dir"
        if ! runuser -u postgres -- test -x "$dir"; then
            echo "The postgres user cannot reach $dir (a parent folder is private)." >&2
            echo "Set DATABASE_URL to an existing database, or run from a folder others can traverse." >&2
            return 1
        fi
    fi
    chmod 700 "$dir"
    if [ ! -f "$dir/PG_VERSION" ]; then
        echo "==> creating a private PostgreSQL cluster in $dir" >&2
        # trust is safe here: the only way in is the unix socket inside this 0700 folder.
        pg_as_owner "$bin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C >"$dir.initdb.log" 2>&1 || {
            cat "$dir.initdb.log" >&2
            return 1
        }
        rm -f "$dir.initdb.log"
    fi
    if ! pg_as_owner "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
        pg_as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
            -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c max_connections=200 -c fsync=${PG_FSYNC:-on} ${PG_SETTINGS:-}" \
            start >/dev/null || {
            tail -n 20 "$dir/server.log" >&2
            return 1
        }
    fi
    if ! psql -h "$dir" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'virtual_tourist'" | grep -q 1; then
        psql -h "$dir" -U postgres -d postgres -qc "CREATE DATABASE virtual_tourist" >/dev/null
    fi
    echo "postgresql:///virtual_tourist?host=$dir&user=postgres"
}

pg_stop() {
    local dir="$1" bin
    bin=$(pg_bindir) || return 0
    [ -f "$dir/PG_VERSION" ] || return 0
    pg_as_owner "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
}
