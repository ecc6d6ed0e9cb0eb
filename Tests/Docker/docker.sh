# Shell functions for the Docker tests (sourced by Tests/Docker/* and script/test).

# docker_up: makes sure a Docker daemon answers; starts Debian's dockerd when none runs (as root),
# and sets DOCKERD_STARTED to its pid so the caller can stop it with docker_down.
DOCKERD_STARTED=
docker_up() {
    docker info >/dev/null 2>&1 && return 0
    if [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null; then
        echo "No Docker daemon answers, and this user cannot start one (Debian: apt-get install docker.io)." >&2
        return 1
    fi
    local log=${DOCKERD_LOG:-/var/log/virtual-tourist-dockerd.log}
    dockerd >"$log" 2>&1 &
    DOCKERD_STARTED=$!
    for _ in $(seq 1 120); do
        docker info >/dev/null 2>&1 && return 0
        kill -0 "$DOCKERD_STARTED" 2>/dev/null || break
        sleep 0.5
    done
    tail -20 "$log" >&2
    echo "dockerd did not start" >&2
    return 1
}

docker_down() {
    [ -n "$DOCKERD_STARTED" ] || return 0
    kill -TERM "$DOCKERD_STARTED" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$DOCKERD_STARTED" 2>/dev/null || break; sleep 0.5; done
    DOCKERD_STARTED=
}

# compose ARGS…: Docker's own `docker compose` where it is installed, Debian's docker-compose otherwise.
compose() {
    if docker compose version >/dev/null 2>&1; then docker compose "$@"; else docker-compose "$@"; fi
}

# free_port: a free TCP port on 127.0.0.1.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# docker_build ARGS…: docker build, without the legacy builder's deprecation notice (Debian's
# docker.io has no buildx; the notice is all the legacy builder says that we do not want).
docker_build() {
    docker build "$@" 2> >(grep -vE 'DEPRECATED|legacy builder|buildx|docs\.docker\.com/go/buildx|^[[:space:]]*$' >&2)
}

# recipe FILE TITLE: the ```sh block of FILE whose first line starts with "# TITLE" (exactly one must).
recipe() {
    python3 - "$1" "$2" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
blocks = [b for b in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M) if b.split("\n", 1)[0].startswith("# " + sys.argv[2])]
if len(blocks) != 1:
    sys.exit(f"{sys.argv[1]}: {len(blocks)} ```sh blocks start with “# {sys.argv[2]}”")
print(blocks[0], end="")
PY
}

# run_recipe FILE TITLE: runs that block with bash as an operator would, from the current folder.
# Where Docker's `docker compose` is missing, `docker compose …` in it runs Debian's docker-compose.
run_recipe() {
    local text shim
    text=$(recipe "$1" "$2") || return 1
    shim=$(mktemp -d)
    if ! docker compose version >/dev/null 2>&1; then
        cat > "$shim/docker" <<SHIM
#!/bin/sh
if [ "\$1" = compose ]; then shift; exec docker-compose "\$@"; fi
exec $(command -v docker) "\$@"
SHIM
        chmod +x "$shim/docker"
    fi
    local status=0
    PATH="$shim:$PATH" timeout 600 bash -euo pipefail -c "$text" || status=$?
    rm -rf "$shim"
    return $status
}
