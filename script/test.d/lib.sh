# Sourced by every stage in script/test.d/. script/test has already installed the packages, made
# the Python environment, built the code and started a throwaway PostgreSQL cluster; it passes
#   TEST_DATABASE_URL   that cluster's virtual_tourist database (the Swift tests' own)
#   TEST_PG_DIR         the cluster's folder (its unix socket), for databases of a stage's own
#   TEST_SCRATCH        this stage's own empty folder
# A stage starts every server it needs itself (its own database, port, photo store and limits),
# so no stage depends on what another one did, or how long it took: any stage runs alone.
set -euo pipefail
source script/postgres.sh
# free_port, docker_up and docker_down.
source Tests/Docker/docker.sh

stage=$(basename "$0")
stage_pids=()
kill_pids=()   # servers that end only on SIGKILL (aiosmtpd)
stage_cleanup() {
    [ ${#kill_pids[@]} -eq 0 ] || kill -KILL "${kill_pids[@]}" 2>/dev/null || true
    [ ${#stage_pids[@]} -eq 0 ] || kill "${stage_pids[@]}" 2>/dev/null || true
    [ ${#stage_pids[@]} -eq 0 ] || wait "${stage_pids[@]}" 2>/dev/null || true
}
trap stage_cleanup EXIT

# new_database NAME: an empty database of this stage's own in the test cluster; prints its URL.
new_database() {
    local name="${stage//-/_}_$1"
    pg_as_owner "$(pg_bindir)/createdb" -h "$TEST_PG_DIR" -U postgres "$name"
    echo "${TEST_DATABASE_URL/virtual_tourist/$name}"
}

# wait_for PORT [SECONDS]: until something accepts connections on 127.0.0.1:PORT.
wait_for() {
    local deadline=$((SECONDS + ${2:-60}))
    while [ $SECONDS -lt $deadline ]; do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.2
    done
    echo "nothing listening on $1" >&2
    return 1
}

# start_fixture [ARGS…]: the Flickr-compatible photo fixture on a free port; sets fixture_url.
start_fixture() {
    local port
    port=$(free_port)
    .build/debug/photo-fixture --port "$port" "$@" > "$TEST_SCRATCH/fixture-$port.log" 2>&1 &
    stage_pids+=($!)
    wait_for "$port"
    fixture_url="http://127.0.0.1:$port/services/rest/"
}

# start_app NAME [VAR=VALUE…]: the app on a free port with a database, photo store and log of its
# own (NAME; APP_DATABASE names one to share instead), sign-up open and photos from the fixture
# (start_fixture first); sets app_url, app_log and app_database. VAR=VALUE pairs add or override settings.
start_app() {
    local name="$1" port database
    shift
    port=${APP_PORT:-$(free_port)}
    database=${APP_DATABASE:-$(new_database "$name")}
    app_log="$TEST_SCRATCH/app-$name.log"
    env DATABASE_URL="$database" PORT="$port" SIGN_UP=open PHOTO_PROVIDER=fixture PHOTO_STORE="$TEST_SCRATCH/photos-$name" \
        FLICKR_API_URL="${fixture_url:-}" LOG_LEVEL=warning "$@" \
        .build/debug/virtual-tourist serve > "$app_log" 2>&1 &
    stage_pids+=($!)
    wait_for "$port"
    app_url="http://127.0.0.1:$port"
    app_database="$database"
}

# start_smtp NAME: a real SMTP server (aiosmtpd from the venv) on a free port, keeping what it
# accepts in the Maildir $maildir; sets smtp_port. aiosmtpd ends only on SIGKILL (stop_stage's).
start_smtp() {
    smtp_port=$(free_port)
    maildir="$TEST_SCRATCH/maildir-$1"
    python3 -m aiosmtpd -n -l "127.0.0.1:$smtp_port" -c aiosmtpd.handlers.Mailbox "$maildir" > "$TEST_SCRATCH/smtp-$1.log" 2>&1 &
    kill_pids+=($!)
    wait_for "$smtp_port"
}

# Where the browser stages leave their screenshots and console logs.
screenshots="$PWD/.build/browser-screenshots"
mkdir -p "$screenshots"

# show_log FILE…: the end of the logs, after a failure.
show_log() {
    echo "--- the end of $* ---"
    tail -n 50 "$@" || true
    echo "screenshots and console logs of the failing steps: $screenshots"
}
