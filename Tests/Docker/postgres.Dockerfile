# The local stand-in for the official postgres image, from Debian's PostgreSQL packages (Debian 12's
# 15 by default; Tests/Docker/postgres-major builds 17 on Debian 13 and 18 on Debian's testing with
# PG_MAJOR). It keeps that image's documented contract: POSTGRES_PASSWORD / POSTGRES_USER /
# POSTGRES_DB, PGDATA, scripts in /docker-entrypoint-initdb.d run on a new cluster only, an existing
# data directory left as it is, pg_isready on PATH, port 5432. Up to 17 the cluster is PGDATA=
# /var/lib/postgresql/data, a volume; from 18 it is /var/lib/postgresql/18/docker under the volume
# /var/lib/postgresql, and a mount at /var/lib/postgresql/data is refused (PGDATA_DIR, VOLUME_DIR).
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ARG PG_MAJOR=15
ARG PGDATA_DIR=/var/lib/postgresql/data
ARG VOLUME_DIR=/var/lib/postgresql/data
# Options for apt-get update: Debian's testing from a mirror's snapshot may carry a Release file past
# its Valid-Until date (postgres-major passes -o Acquire::Check-Valid-Until=false for it).
ARG APT_UPDATE_OPTIONS=
# hadolint ignore=DL3008
RUN apt-get update $APT_UPDATE_OPTIONS \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "postgresql-$PG_MAJOR" "postgresql-client-$PG_MAJOR" \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /docker-entrypoint-initdb.d /var/run/postgresql "$PGDATA_DIR" \
 && chown -R postgres:postgres /var/run/postgresql /var/lib/postgresql \
 && chmod 2777 /var/run/postgresql
ENV PATH=/usr/lib/postgresql/$PG_MAJOR/bin:$PATH \
    PG_MAJOR=$PG_MAJOR \
    PGDATA=$PGDATA_DIR \
    LANG=C.UTF-8
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME $VOLUME_DIR
ENTRYPOINT ["docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
