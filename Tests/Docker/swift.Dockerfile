# The local stand-in for swift:6.3-bookworm: Debian 12 plus the toolchain installed on the host.
# Built by Tests/Docker/base-images, whose tar context holds this file and the toolchain folder.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ARG TOOLCHAIN=swift
# The runtime packages swift.org lists for Debian 12.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      binutils git gnupg2 libc6-dev libcurl4-openssl-dev libedit2 libgcc-12-dev libpython3-dev \
      libsqlite3-0 libstdc++-12-dev libxml2-dev libncurses-dev libz3-dev pkg-config tzdata zlib1g-dev \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY ${TOOLCHAIN}/usr/ /usr/
CMD ["swift", "--version"]
