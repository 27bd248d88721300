# Sourced by the benchmarks: the Postgres they measure against, configured
# like a production one. This machine's shared Postgres runs with
# `autovacuum = off` (its conf.d/90-ci.conf), which no production Postgres
# does: a queue that updates rows (webhook deliveries) then slows down with
# its dead rows, and per-table autovacuum settings do nothing.
#
#   BENCH_PG=own (default)  initdb a cluster of the benchmark's own with
#                           Postgres's default settings (autovacuum on), on
#                           BENCH_PG_PORT (5442), removed on exit;
#                           BENCH_PG_MAX_CONNECTIONS overrides the one
#                           default a benchmark may outgrow (100: the stack
#                           holds about 56, Svix's pool beside it more);
#                           BENCH_PG_OPTIONS adds server options for a
#                           diagnosis (e.g. "-c shared_preload_libraries=
#                           pg_stat_statements"): not for reported figures
#   BENCH_PG=shared         use PGHOST/PGPORT (127.0.0.1:5432), refused unless
#                           it runs with autovacuum on
#
# After `bench_postgres_start`, PGH and PGP name the server, and
# BENCH_PG_SAYS says which it is (print it with the figures).

. scripts/lib/postgres.sh

bench_postgres_start() {
  case "${BENCH_PG:-own}" in
  own)
    local bindir
    bindir=$(pg_bindir)
    BENCH_PG_DIR=$(mktemp -d /tmp/hub-bench-pg.XXXXXX)
    [ "$(id -u)" = 0 ] && chown postgres "$BENCH_PG_DIR"
    PGH=127.0.0.1
    PGP=${BENCH_PG_PORT:-5442}
    # Known before the start, so that a start failing half-way is still
    # stopped and removed by bench_postgres_stop.
    BENCH_PG_CTL="$bindir/pg_ctl"
    run_pg "$bindir/initdb" -D "$BENCH_PG_DIR/data" -U postgres --auth=trust -E UTF8 >/dev/null
    run_pg "$BENCH_PG_CTL" -D "$BENCH_PG_DIR/data" -l "$BENCH_PG_DIR/log" -w \
      -o "-p $PGP -k $BENCH_PG_DIR -c listen_addresses=$PGH ${BENCH_PG_MAX_CONNECTIONS:+-c max_connections=$BENCH_PG_MAX_CONNECTIONS} ${BENCH_PG_OPTIONS:-}" start >/dev/null
    BENCH_PG_SAYS="postgres: a cluster of its own (PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'), initdb defaults${BENCH_PG_MAX_CONNECTIONS:+ but max_connections}: autovacuum $(bench_pg_show autovacuum), shared_buffers $(bench_pg_show shared_buffers), max_connections $(bench_pg_show max_connections)) on port $PGP"
    ;;
  shared)
    PGH=${PGHOST:-127.0.0.1}
    PGP=${PGPORT:-5432}
    local av
    av=$(bench_pg_show autovacuum)
    if [ "$av" != on ]; then
      echo "postgres at $PGH:$PGP runs with autovacuum = $av, unlike any production Postgres: refused (BENCH_PG=own starts one of the benchmark's own)" >&2
      exit 1
    fi
    BENCH_PG_SAYS="postgres: the shared one at $PGH:$PGP (autovacuum on)"
    ;;
  *)
    echo "BENCH_PG is own or shared, not ${BENCH_PG}" >&2
    exit 2
    ;;
  esac
}

bench_pg_show() {
  psql -h "$PGH" -p "$PGP" -U postgres -d postgres -Atqc "SHOW $1"
}

# Stop and remove a cluster of the benchmark's own (nothing for a shared one).
bench_postgres_stop() {
  if [ -n "${BENCH_PG_DIR:-}" ]; then
    [ -f "$BENCH_PG_DIR/data/postmaster.pid" ] &&
      { run_pg "$BENCH_PG_CTL" -D "$BENCH_PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true; }
    rm -rf "$BENCH_PG_DIR"
    BENCH_PG_DIR=
  fi
}
