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

# run_recipe FILE TITLE [FROM TO]: runs that block with bash as an operator would, from the current
# folder (with FROM, a text the block must hold, replaced by TO: a value the docs say to set).
# Where Docker's `docker compose` is missing, `docker compose …` in it runs Debian's docker-compose.
run_recipe() {
    local text shim
    text=$(recipe "$1" "$2") || return 1
    if [ $# -ge 4 ]; then
        grep -qF -- "$3" <<<"$text" || { echo "$1: the block “$2” has no “$3” to set" >&2; return 1; }
        text=${text/"$3"/"$4"}
    fi
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

# use_local_images: builds (or finds) the local stand-ins of Tests/Docker/base-images and exports
# the names docker-compose.yml and the Dockerfile take: POSTGRES_IMAGE, SWIFT_IMAGE, RUNTIME_IMAGE
# (and DEBIAN_IMAGE).
use_local_images() {
    local images
    images=$("$(dirname "${BASH_SOURCE[0]}")/base-images") || return 1
    eval "$images"
    export DEBIAN_IMAGE POSTGRES_IMAGE SWIFT_IMAGE RUNTIME_IMAGE=$DEBIAN_IMAGE
}

# copy_checkout REPO DEST: the checkout as a person would have it (tracked files and new ones that
# are not ignored) copied into DEST.
copy_checkout() {
    mkdir -p "$2"
    (cd "$1" && git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) \
        | tar -xf - -C "$2"
}

# demo_env PORT PASSWORD NAME: in the current folder, .env from .env.example as the README says, with
# the offline demo's settings, the app on 127.0.0.1:PORT, that database password and the project
# name NAME (never the example's virtual-tourist: a test must not touch this machine's own stack).
demo_env() {
    cp .env.example .env
    sed -i -e "s|^POSTGRES_PASSWORD=.*|POSTGRES_PASSWORD=$2|" \
           -e "s|^COMPOSE_PROJECT_NAME=.*|COMPOSE_PROJECT_NAME=$3|" \
           -e "s|^APP_PORT=.*|APP_PORT=$1|" \
           -e "s|^CONTACT_EMAIL=.*|CONTACT_EMAIL=operator@example.org|" \
           -e "s|^PUBLIC_URL=.*|PUBLIC_URL=http://127.0.0.1:$1|" .env
    # The README's offline-demo recipe, as written, for the .env lines it changes (the journey
    # starts the stack itself, to time the build and the start separately).
    local demo
    demo=$(recipe "$(dirname "${BASH_SOURCE[0]}")/../../README.md" "offline demo") || return 1
    bash -euo pipefail -c "$(grep -v '^docker compose' <<<"$demo")"
    grep -q '^FLICKR_API_URL=http://fixture' .env || { echo "the README's demo recipe set no FLICKR_API_URL line" >&2; return 1; }
    grep -q '^PHOTO_PROVIDER=fixture' .env || { echo "the README's demo recipe did not set PHOTO_PROVIDER" >&2; return 1; }
    grep -q 'docker compose --profile demo up -d' <<<"$demo" || { echo "the README's demo recipe does not start the demo profile" >&2; return 1; }
    grep -qx "COMPOSE_PROJECT_NAME=$3" .env || { echo ".env.example has no COMPOSE_PROJECT_NAME line to set" >&2; return 1; }
}

# stack ARGS…: docker compose with the demo profile, in the current folder.
stack() { compose --profile demo "$@"; }

# step TEXT: one line of a test's log, with the time.
step() { printf '%s  %s\n' "$(date -u +%T)" "$*"; }

# healthy [SERVICE…]: waits up to 150 s until those services (every container of the stack when
# none is named) report healthy, and logs their states.
healthy() {
    local deadline=$(( $(date +%s) + 150 )) ids states=
    while [ "$(date +%s)" -lt "$deadline" ]; do
        if [ $# -gt 0 ]; then ids=$(for service in "$@"; do stack ps -q "$service"; done); else ids=$(stack ps -q); fi
        if [ -n "$ids" ]; then
            states=$(docker inspect -f '{{ index .Config.Labels "com.docker.compose.service" }}={{ if .State.Health }}{{ .State.Health.Status }}{{ else }}no-healthcheck{{ end }}' $ids | sort | tr '\n' ' ')
            if ! grep -qvE '=healthy$' <(tr ' ' '\n' <<<"$states" | sed '/^$/d'); then
                step "healthy: $states"
                return 0
            fi
        fi
        sleep 1
    done
    echo "not all services became healthy: $states" >&2
    return 1
}

# finish_stack: an EXIT trap for the stack tests. On failure it shows the stack's state and logs;
# always it removes the stack in $project with its volumes, and $scratch.
finish_stack() {
    local status=$?
    if [ -d "${project:-}" ]; then
        cd "$project"
        if [ "$status" != 0 ]; then
            echo "--- docker compose ps ---"; stack ps || true
            echo "--- logs ---"; stack logs --tail 40 2>&1 || true
        fi
        stack down -v --remove-orphans >/dev/null 2>&1 || true
    fi
    cd /; rm -rf "$scratch"
    docker_down
    exit "$status"
}
