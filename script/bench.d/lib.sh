# Shared by script/bench's suites (script/bench.d/*; sourced, never run): the scratch folder and its
# cleanup, CPU pinning, wrk and its parsing, waiting for servers, signing up, CPU and memory readings,
# release builds, and BEFORE=<git rev> (the same binaries built from an older revision).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source script/postgres.sh
# Benchmarks sign up many people through the page: every app they start takes anyone.
export SIGN_UP=open
duration=${DURATION:-10}

# script/bench bootstraps once for all suites; a suite started on its own does it itself.
if [ -z "${BENCH_BOOTSTRAPPED:-}" ]; then
    script/bootstrap build local bench test
    export BENCH_BOOTSTRAPPED=1
fi
# Python packages (selenium for the map suite) live in .venv: script/python-env.
PATH="$(script/python-env):$PATH"

# Servers are pinned to CPU 0 and the load generator to CPU 1 when there are two cores.
if [ "$(nproc)" -ge 2 ]; then server_cpu="taskset -c 0"; load_cpu="taskset -c 1"; else server_cpu=""; load_cpu=""; fi
scratch=$(mktemp -d /tmp/virtual-tourist-bench.XXXXXX)
chmod 755 "$scratch"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -d "$scratch/postgres" ] && pg_stop "$scratch/postgres"
    if [ -n "${BENCH_KEEP:-}" ]; then echo "kept $scratch (logs)" >&2; else rm -rf "$scratch"; fi
}
trap cleanup EXIT

# swift build's progress lines are noise; pipefail keeps its exit status.
quiet() { grep -vE '^\[[0-9]+/[0-9]+\]|^Compiling|^Write' || true; }

# Release build of the benchmark products named (Benchmarks/, one product at a time, so a suite
# never waits for peers it does not run); sets $bin.
build_benchmarks() {
    echo "==> building benchmarks (release)"
    local product
    for product in "$@"; do
        swift build -c release --package-path Benchmarks --product "$product" 2>&1 | quiet
    done
    bin=$(swift build -c release --package-path Benchmarks --show-bin-path)
}

# BEFORE=<git rev>: the revision checked out (once per commit, kept for the next run) in
# .build/bench-before/<commit>, a git worktree; prints its folder. Only its binaries are used: the
# suites that run them are this revision's.
before_checkout() {
    local commit dir
    commit=$(git rev-parse --verify "${BEFORE}^{commit}")
    dir="$PWD/.build/bench-before/$commit"
    if [ ! -e "$dir/Package.swift" ]; then
        git worktree prune
        mkdir -p "$(dirname "$dir")"
        git worktree add --detach "$dir" "$commit" >&2
    fi
    echo "$dir"
}

# The BEFORE revision's products, release build, from its package at $1 ("." for the app's,
# "Benchmarks" for the benchmarks'); sets $before_path to that package's bin folder.
build_before_products() {
    local dir package=$1 product
    shift
    dir=$(before_checkout)
    echo "==> building $* at BEFORE=$BEFORE ($(git rev-parse --short "${BEFORE}^{commit}"), release)"
    for product in "$@"; do
        swift build -c release --package-path "$dir/$package" --product "$product" 2>&1 | quiet
    done
    before_path=$(swift build -c release --package-path "$dir/$package" --show-bin-path)
}

# The benchmark products (sets $before_bin) and the app's products (sets $before_release).
build_before_benchmarks() { build_before_products Benchmarks "$@"; before_bin=$before_path; }
build_before_app() { build_before_products . "$@"; before_release=$before_path; }

rss_mb() { awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# The highest VmRSS the process has had (the kernel's high-water mark), in MB.
peak_rss_mb() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

wait_for_port() {
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "nothing listening on port $1" >&2; return 1
}

# A wrk latency ("850.00us", "12.5ms", "1.2s") on stdin's lines → milliseconds, for the line whose
# first field is $1 ("50%", "99%").
wrk_percentile() {
    awk -v q="$1" '$1 == q { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 }; printf "%.2f", v }'
}

# wrk's summary → "requests/s p99"; p99 normalised to milliseconds.
run_wrk() {
    local connections=$1 url=$2 out
    local rps p99
    [ -n "${WRK_HEADERS+x}" ] || WRK_HEADERS=()
    out=$($load_cpu wrk -t2 -c"$connections" -d"${duration}s" --latency ${3:+-s "$3"} "${WRK_HEADERS[@]}" "$url")
    rps=$(awk '/^Requests\/sec/ { printf "%.0f", $2 }' <<<"$out")
    p99=$(wrk_percentile 99% <<<"$out")
    local errors
    errors=$(awk '/Non-2xx|Socket errors/' <<<"$out")
    [ -n "$errors" ] && echo "    wrk: $errors" >&2
    echo "$rps $p99"
}

run_wrk_script() { run_wrk "$1" "$2" "$3"; }

# "rps p99;rps p99;…" (one pair per run) → "median-rps median-p99 p99/p99/…".
medians() {
    tr ';' '\n' <<<"$1" | awk 'BEGIN { n = 0 } NF == 2 { r[n] = $1; p[n] = $2; n++ }
        function median(a, n,   i, j, t, b) {
            for (i = 0; i < n; i++) b[i] = a[i]
            for (i = 1; i < n; i++) for (j = i; j > 0 && b[j - 1] + 0 > b[j] + 0; j--) { t = b[j]; b[j] = b[j - 1]; b[j - 1] = t }
            return n % 2 ? b[int(n / 2)] : (b[n / 2 - 1] + b[n / 2]) / 2
        }
        END {
            runs = ""; for (i = 0; i < n; i++) runs = runs (i ? "/" : "") sprintf("%.0f", p[i])
            printf "%.0f %.2f %s\n", median(r, n), median(p, n), runs
        }'
}

# a / b to two decimals, 0 when b is 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# The words of $1 rotated left by $2: who goes first in round n of servers taking turns.
rotate() {
    local -a words
    read -r -a words <<<"$1"
    local n=${#words[@]} i out=()
    for ((i = 0; i < n; i++)); do out+=("${words[$(( (i + $2) % n ))]}"); done
    echo "${out[*]}"
}

# Signs up through the app and prints the session cookie's value.
sign_up() {
    local port=$1 email=$2 name=$3 jar page token
    jar=$(mktemp "$scratch/jar.XXXXXX")
    page=$(curl -s -c "$jar" -b "$jar" "http://127.0.0.1:$port/sign-up")
    token=$(grep -o 'name="_csrf" value="[^"]*"' <<<"$page" | head -1 | cut -d'"' -f4)
    curl -s -o /dev/null -c "$jar" -b "$jar" --data-urlencode "_csrf=$token" --data-urlencode "email=$email" \
        --data-urlencode "display_name=$name" --data-urlencode "password=correct horse battery" \
        --data-urlencode "password_confirmation=correct horse battery" "http://127.0.0.1:$port/sign-up"
    awk '$6 == "vt_session" { print $7 }' "$jar"
}

# CPU ticks (user + system) the given processes have used so far.
cpu_ticks() {
    local pid
    for pid in "$@"; do sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $12 + $13 }'; done | awk '{ s += $1 } END { print s + 0 }'
}

# Waits (at most 5 s) until the given processes have been idle for 0.2 s. Servers share CPU 0:
# when wrk stops, the server it measured still works through the requests left queued (a second
# or more of /pins.json with 1,000 pins at 256 connections), and the next cell, on another
# server, would count that as its own latency.
settle() {
    local tries=0 before after
    while [ "$tries" -lt 25 ]; do
        before=$(cpu_ticks "$@"); sleep 0.2; after=$(cpu_ticks "$@")
        [ $((after - before)) -le 1 ] && return 0
        tries=$((tries + 1))
    done
}

# CPU milliseconds the PostgreSQL cluster in $1 has used: the postmaster and its live children,
# plus what its exited children (autovacuum workers, ended backends) left in cutime/cstime.
pg_cpu_ms() {
    local postmaster tick
    postmaster=$(head -1 "$1/postmaster.pid")
    tick=$(getconf CLK_TCK)
    { echo "$postmaster"; pgrep -P "$postmaster"; } | while read -r pid; do
        # Fields after the command name: utime stime cutime cstime are the 12th to 15th.
        sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk -v main=$((pid == postmaster)) '{ print $12 + $13 + (main ? $14 + $15 : 0) }'
    done | awk -v tick="$tick" '{ s += $1 } END { printf "%.0f", s * 1000 / tick }'
}
