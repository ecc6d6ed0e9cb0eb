# The local stand-in for the official postgres image, from Debian's PostgreSQL packages (Debian 12's
# 15 by default; Tests/Docker/postgres-major builds 17 on Debian 13 with PG_MAJOR). It keeps
# that image's documented contract: POSTGRES_PASSWORD / POSTGRES_USER / POSTGRES_DB, PGDATA
# (default /var/lib/postgresql/data), scripts in /docker-entrypoint-initdb.d run on a new cluster
# only, an existing data directory left as it is, pg_isready on PATH, port 5432.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ARG PG_MAJOR=15
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "postgresql-$PG_MAJOR" "postgresql-client-$PG_MAJOR" \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /docker-entrypoint-initdb.d /var/run/postgresql /var/lib/postgresql/data \
 && chown -R postgres:postgres /var/run/postgresql /var/lib/postgresql \
 && chmod 2777 /var/run/postgresql
ENV PATH=/usr/lib/postgresql/$PG_MAJOR/bin:$PATH \
    PGDATA=/var/lib/postgresql/data \
    LANG=C.UTF-8
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /var/lib/postgresql/data
ENTRYPOINT ["docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
