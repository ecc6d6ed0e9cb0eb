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
        # From /: the current folder may be one postgres cannot enter (every path given is absolute).
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

# pg_place DIR: prints the folder the cluster of DIR lives in, made ready for its owner. That is
# DIR itself, unless we are root and the postgres user cannot reach DIR (a clone under /root, which
# is 0700): then it is /var/lib/virtual-tourist/postgres-HASH, HASH of DIR's path (each clone has
# its own and finds it again), and DIR is made a link to it, so whatever names DIR (script/server
# --stop-database, psql -h DIR) still works for root.
pg_place() {
    local dir="$1" parent target
    # A link (made here on an earlier run, or the operator's own) stands for the folder it names.
    [ -L "$dir" ] && dir=$(readlink -m "$dir")
    parent=$(mkdir -p "$(dirname "$dir")" && cd "$(dirname "$dir")" && pwd -P) || return 1
    dir="$parent/$(basename "$dir")"
    if [ "$(id -u)" != 0 ] || runuser -u postgres -- test -x "$parent"; then
        mkdir -p "$dir"
        [ "$(id -u)" != 0 ] || chown postgres:postgres "$dir"
        echo "$dir"
        return
    fi
    # A cluster already in DIR that postgres cannot reach (its parent's mode changed since) stays
    # where it is: moving a database is the operator's decision.
    if [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
        echo "The postgres user cannot reach $dir (a parent folder is private), and it is not empty." >&2
        echo "Make its parent folders traversable (chmod o+x), or set DATABASE_URL to an existing database." >&2
        return 1
    fi
    target="/var/lib/virtual-tourist/postgres-$(printf %s "$dir" | sha256sum | cut -c1-16)"
    mkdir -p "$target"
    chmod 755 /var/lib/virtual-tourist
    chown postgres:postgres "$target"
    rmdir "$dir" 2>/dev/null || true
    ln -s "$target" "$dir"
    echo "==> the postgres user cannot enter $parent (a folder on its path is private), so the cluster is in $target; $dir links there" >&2
    echo "$target"
}

# pg_start DIR: creates the cluster in DIR (or where pg_place puts it) if needed, starts it if
# stopped, creates the virtual_tourist database, and prints its URL. PG_SETTINGS adds server
# settings when it starts, e.g. "-c shared_preload_libraries=pg_stat_statements" (script/bench albums).
pg_start() {
    local dir bin
    bin=$(pg_bindir) || return 1
    dir=$(pg_place "$1") || return 1
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
    local dir bin
    bin=$(pg_bindir) || return 0
    # The folder itself: postgres may not reach it through a link in a private folder.
    dir=$(readlink -f "$1") || return 0
    [ -f "$dir/PG_VERSION" ] || return 0
    pg_as_owner "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
}
