# Virtual Tourist: built with the official Swift image for Debian bookworm, run on bookworm-slim.
# System packages come from script/packages.txt, the list script/bootstrap installs from too.
# The base images are build arguments (docker-compose.yml passes them on), so a machine without a
# registry can build with local images of the same contents (Tests/Docker/base-images).
ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${SWIFT_IMAGE} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
COPY script/packages.txt script/bootstrap script/
# script/bootstrap runs apt-get for the "build" packages (libpq-dev, libcurl4-openssl-dev, …);
# their versions are Debian bookworm's, pinned by the base image.
RUN script/bootstrap build && rm -rf /var/lib/apt/lists/*
# SwiftPM loads every target the manifest names, the test targets included, so their sources come
# too (.dockerignore lets in exactly the manifest's folders; script/test checks it does).
COPY Package.swift ./
COPY Sources Sources
COPY Tests Tests
# The two binaries share one copy of the Swift runtime and Foundation (linked dynamically, the
# libraries they load copied beside them): statically linked, each carried its own 55 MB of it.
RUN swift build -c release --product virtual-tourist \
 && swift build -c release --product photo-fixture \
 && mkdir -p /out/bin /out/lib \
 && bin="$(swift build -c release --show-bin-path)" \
 && cp "$bin/virtual-tourist" "$bin/photo-fixture" /out/bin/ \
 && ldd /out/bin/* | awk '$3 ~ "^/usr/lib/swift/" { print $3 }' | sort -u | xargs cp -t /out/lib/ \
 && strip /out/bin/* \
 && strip --strip-unneeded /out/lib/*

FROM ${RUNTIME_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY script/packages.txt /tmp/packages.txt
# Only the runtime libraries ("run" lines: libpq5, libcurl4, libcrypt1, zlib1g, ca-certificates, …).
# hadolint ignore=DL3008
RUN apt-get update \
 && awk '$1 == "run" { print $2 }' /tmp/packages.txt | xargs apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /tmp/packages.txt \
 && useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin virtualtourist \
 && mkdir -p /data/maps /data/tile-cache /data/photos /data/uploads \
 && chown 10001 /data/tile-cache /data/photos /data/uploads
WORKDIR /app
COPY --from=build /out/lib/ /usr/lib/swift/linux/
COPY --from=build /out/bin/ /app/bin/
# A library left behind would only show when the container starts: fail the build instead.
RUN ! ldd /app/bin/virtual-tourist /app/bin/photo-fixture | grep 'not found'
# The release, from docker-compose.yml (Version.swift's number): an image is never labelled with
# another version than its binary says.
# APP_TAG, the tag Compose builds under (APP_IMAGE): a version in it must be this one, so a rollback
# whose old image is gone stops here instead of building today's code under the old version's tag.
ARG APP_VERSION=
ARG APP_TAG=
RUN [ -z "$APP_VERSION" ] || [ "$(/app/bin/virtual-tourist --version)" = "virtual-tourist $APP_VERSION" ] \
 || { echo "APP_VERSION=$APP_VERSION but the binary says: $(/app/bin/virtual-tourist --version)" >&2; exit 1; }
RUN tag=${APP_TAG##*:}; [ -z "$APP_VERSION" ] || [ "$tag" = "$APP_TAG" ] || [ "$tag" = "$APP_VERSION" ] \
 || ! expr "$tag" : '[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*' >/dev/null \
 || { echo "APP_IMAGE=$APP_TAG names version $tag, but this checkout builds $APP_VERSION: that image is not on this machine. Going back needs it (docker images virtual-tourist; docs/admin.md, Upgrades)" >&2; exit 1; }
LABEL org.opencontainers.image.title="Virtual Tourist" \
      org.opencontainers.image.version="$APP_VERSION"
COPY Public Public
COPY migrations migrations
COPY Sources/PhotoFixture/Photos fixture-photos
# /app/bin on PATH: `docker compose exec app virtual-tourist admin …` (README, Administration).
# Photos being added are written to a volume of their own as they arrive (UPLOAD_SPOOL_DIR), not
# to /tmp, which Compose makes a tmpfs (memory), nor to the read-only root.
ENV PATH=/app/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOST=0.0.0.0 \
    PORT=8080 \
    PUBLIC_DIR=/app/Public \
    MIGRATIONS_DIR=/app/migrations \
    TILE_CACHE_DIR=/data/tile-cache \
    PHOTO_STORE=/data/photos \
    UPLOAD_SPOOL_DIR=/data/uploads
USER 10001
EXPOSE 8080
# docker stop sends SIGTERM: the server stops accepting, finishes requests in flight, then exits.
STOPSIGNAL SIGTERM
# Readiness (/readyz): the database answers, migrations are applied, the photo store takes writes.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 CMD ["/app/bin/virtual-tourist", "healthcheck"]
# Migrations run at start (serve applies pending ones under an advisory lock).
CMD ["/app/bin/virtual-tourist", "serve"]
