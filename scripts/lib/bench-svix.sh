# Sourced by the webhook benchmarks: Svix's open-source server (svix-server)
# measured like our dispatcher, in the same run, through its authenticated
# HTTP API. Not built here: SVIX_SERVER names a svix-server binary built from
# its repository (github.com/svix/svix-webhooks, server/), run as it is with
# its defaults except:
#   - everything on 127.0.0.1: the API on SVIX_PORT (8071), a Redis of its
#     own as its queue on SVIX_REDIS_PORT (6390, no persistence), its own
#     database (svix_bench) on the benchmark's Postgres ($PGH:$PGP from
#     scripts/lib/bench-postgres.sh), the in-memory cache (its default);
#   - whitelist_subnets = [127.0.0.1/32], which its SSRF protection needs to
#     deliver to the local receiver;
#   - a database pool of SVIX_DB_POOL (80) instead of 100: the benchmark's
#     Postgres has initdb's max_connections = 100;
#   - RUST_LOG=info (Svix's own default), or warn under LOG=off: logging as our
#     services get it in scripts/bench-webhooks.sh (scripts/lib/bench-logging.sh).
# The receiver is `webhook-bench receive <port> <secrets> --standard-only` on
# SVIX_RECEIVER_PORT (9901): Svix signs with the Standard Webhooks scheme
# only (svix-id/svix-timestamp/svix-signature headers), with a secret per
# endpoint.
#
#   svix_available                  false, saying why, when SVIX_SERVER is unset
#                                   (1) or not an executable (2)
#   svix_start                      Redis, database, migrations, a token, the server
#   svix_setup <endpoints> <label>  an application with that many endpoints
#                                   (at /r/$SVIX_NEXT_INDEX...), their secrets
#                                   appended to $SVIX_SECRETS; its id in
#                                   SVIX_APP[<endpoints>]
#   svix_receiver_start             the receiver for $SVIX_SECRETS (after the setups)
#   svix_phase <endpoints> <deliveries> <clients>
#                                   deliveries/endpoints messages to that
#                                   application from <clients> concurrent API
#                                   clients; prints one line like
#                                   bench-webhooks.sh's: the time from the first
#                                   POST to the last delivery received
#   svix_stop                       stops all of the above, drops the database
#
# The svix-bench and webhook-bench binaries are taken from $BIN (default
# $CARGO_TARGET_DIR/release); the caller builds them.

SVIX_PORT=${SVIX_PORT:-8071}
SVIX_REDIS_PORT=${SVIX_REDIS_PORT:-6390}
SVIX_RECEIVER_PORT=${SVIX_RECEIVER_PORT:-9901}
SVIX_DB_POOL=${SVIX_DB_POOL:-80}
SVIX_DB=${SVIX_DB:-svix_bench}
SVIX_URL=http://127.0.0.1:$SVIX_PORT
SVIX_RECEIVER=http://127.0.0.1:$SVIX_RECEIVER_PORT
SVIX_NEXT_INDEX=${SVIX_NEXT_INDEX:-0}
SVIX_PID= SVIX_REDIS_PID= SVIX_RECEIVER_PID= SVIX_DIR= SVIX_TOKEN=
declare -gA SVIX_APP=()

svix_available() {
  if [ -z "${SVIX_SERVER:-}" ]; then
    echo "svix: not measured: Svix is not built here. Pass a svix-server binary built from its repository (github.com/svix/svix-webhooks, server/) as SVIX_SERVER=/path/to/svix-server." >&2
    return 1
  fi
  if [ ! -x "$SVIX_SERVER" ]; then
    echo "svix: SVIX_SERVER=$SVIX_SERVER is not an executable file" >&2
    return 2
  fi
}

_svix_tools() { echo "${BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}/release}"; }

# The binary's configuration, in the environment of its runs only (nothing
# exported to the caller); DATABASE_URL, which it would take as its DSN,
# unset. It runs from a directory of its own so that no stray config.toml is
# read, and by exec, so that a background run's $! is the server itself.
_svix_env() {
  SVIX_ENV=(-u DATABASE_URL
    SVIX_LISTEN_ADDRESS="127.0.0.1:$SVIX_PORT"
    SVIX_DB_DSN="postgresql://postgres@$PGH:$PGP/$SVIX_DB"
    SVIX_DB_POOL_MAX_SIZE="$SVIX_DB_POOL"
    SVIX_QUEUE_TYPE=redis
    SVIX_REDIS_DSN="redis://127.0.0.1:$SVIX_REDIS_PORT"
    SVIX_CACHE_TYPE=memory
    SVIX_JWT_SECRET="$SVIX_JWT_SECRET"
    SVIX_MAIN_SECRET="$SVIX_MAIN_SECRET"
    SVIX_WHITELIST_SUBNETS="[127.0.0.1/32]"
    RUST_LOG="${SVIX_RUST_LOG:-$([ "${LOG:-on}" = off ] && echo warn || echo info)}")
}
_svix_run() { (cd "$SVIX_DIR" && exec env "${SVIX_ENV[@]}" "$SVIX_SERVER" "$@"); }

svix_start() {
  svix_available || return
  : "${PGH:?bench_postgres_start first}" "${PGP:?bench_postgres_start first}"
  if curl -fs -o /dev/null "$SVIX_URL/api/v1/health/" 2>/dev/null; then
    echo "svix: something already answers on $SVIX_URL" >&2
    return 1
  fi
  if redis-cli -h 127.0.0.1 -p "$SVIX_REDIS_PORT" ping >/dev/null 2>&1; then
    echo "svix: a Redis already runs on port $SVIX_REDIS_PORT (SVIX_REDIS_PORT picks another)" >&2
    return 1
  fi
  SVIX_DIR=$(mktemp -d /tmp/hub-bench-svix.XXXXXX)
  SVIX_JWT_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '/+=')
  SVIX_MAIN_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '/+=')
  _svix_env
  redis-server --bind 127.0.0.1 --port "$SVIX_REDIS_PORT" --save '' --appendonly no \
    --dir "$SVIX_DIR" >"$SVIX_DIR/redis.log" 2>&1 &
  SVIX_REDIS_PID=$!
  for _ in $(seq 1 100); do redis-cli -h 127.0.0.1 -p "$SVIX_REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
  psql -h "$PGH" -p "$PGP" -U postgres -qc "DROP DATABASE IF EXISTS $SVIX_DB WITH (FORCE)" 2>/dev/null
  psql -h "$PGH" -p "$PGP" -U postgres -qc "CREATE DATABASE $SVIX_DB"
  _svix_run migrate >"$SVIX_DIR/migrate.log" 2>&1 || { echo "svix: migrations failed:" >&2; cat "$SVIX_DIR/migrate.log" >&2; return 1; }
  SVIX_TOKEN=$(_svix_run jwt generate 2>>"$SVIX_DIR/jwt.log" | sed -n 's/^Token (Bearer): //p')
  [ -n "$SVIX_TOKEN" ] || { echo "svix: jwt generate gave no token:" >&2; cat "$SVIX_DIR/jwt.log" >&2; return 1; }
  (cd "$SVIX_DIR" && exec env "${SVIX_ENV[@]}" "$SVIX_SERVER" >"$SVIX_DIR/server.log" 2>&1) &
  SVIX_PID=$!
  for _ in $(seq 1 300); do curl -fs -o /dev/null "$SVIX_URL/api/v1/health/" 2>/dev/null && break; sleep 0.1; done
  if ! curl -fs -o /dev/null "$SVIX_URL/api/v1/health/"; then
    echo "svix: not healthy on $SVIX_URL after 30 s:" >&2
    tail -n 30 "$SVIX_DIR/server.log" >&2
    return 1
  fi
  : "${SVIX_SECRETS:=$SVIX_DIR/secrets}"
  SVIX_SAYS="svix: $("$SVIX_SERVER" --version 2>/dev/null | head -n1) ($SVIX_SERVER) on $SVIX_URL: queue Redis $(redis-server --version | awk '{print $3}') on port $SVIX_REDIS_PORT (no persistence), cache memory, database $SVIX_DB on $PGH:$PGP (pool $SVIX_DB_POOL), otherwise its defaults"
}

svix_setup() {
  local n=$1 label=$2 app
  app=$("$(_svix_tools)/svix-bench" setup "$SVIX_URL" "$SVIX_TOKEN" "$n" "$SVIX_RECEIVER" \
    "$SVIX_NEXT_INDEX" "$SVIX_SECRETS" "$label")
  SVIX_APP[$n]=$app
  SVIX_NEXT_INDEX=$((SVIX_NEXT_INDEX + n))
}

svix_receiver_start() {
  "$(_svix_tools)/webhook-bench" receive "$SVIX_RECEIVER_PORT" "$SVIX_SECRETS" --standard-only \
    >"$SVIX_DIR/receiver.log" 2>&1 &
  SVIX_RECEIVER_PID=$!
  for _ in $(seq 1 100); do curl -fs -o /dev/null "$SVIX_RECEIVER/stats" 2>/dev/null && break; sleep 0.05; done
  curl -fs -o /dev/null "$SVIX_RECEIVER/stats" || { echo "svix: the receiver did not start:" >&2; cat "$SVIX_DIR/receiver.log" >&2; return 1; }
}

# "<group> <pid> <clock ticks of CPU so far>" for Svix, its Redis and the
# benchmark Postgres (its postmaster and that one's children).
_svix_cpu_snapshot() {
  local dir pm p
  dir=$(psql -h "$PGH" -p "$PGP" -U postgres -d postgres -Atqc "SHOW data_directory" 2>/dev/null) || true
  pm=$(head -n1 "$dir/postmaster.pid" 2>/dev/null) || true
  {
    echo "svix-server $SVIX_PID"
    echo "redis $SVIX_REDIS_PID"
    if [ -n "$pm" ]; then for p in $pm $(pgrep -P "$pm"); do echo "postgres $p"; done; fi
  } | while read -r g p; do
    if [ -r "/proc/$p/stat" ]; then echo "$g $p $(sed 's/^.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')"; fi
  done
}

# CPU seconds per group between two snapshots (a process new since the first
# counts from zero).
_svix_cpu_delta() {
  python3 - "$1" "$2" "$(getconf CLK_TCK)" <<'PY'
import sys
def parse(t):
    return {(g, p): int(v) for g, p, v in (l.split() for l in t.splitlines() if l.strip())}
a, b, hz = parse(sys.argv[1]), parse(sys.argv[2]), int(sys.argv[3])
out = {}
for (g, p), v in b.items():
    out[g] = out.get(g, 0) + v - a.get((g, p), 0)
print(" ".join(f"{g} {out.get(g, 0) / hz:.1f}" for g in ("svix-server", "redis", "postgres")))
PY
}

svix_phase() {
  local n=$1 total=$2 clients=$3
  local app=${SVIX_APP[$n]:?svix_setup $n first}
  local messages=$((total / n)) want t0 got=0 prev=-1 still=0 s last dup bad secs sent cpu0 cpu1
  want=$((messages * n))
  curl -fs -X POST "$SVIX_RECEIVER/reset" >/dev/null
  cpu0=$(_svix_cpu_snapshot)
  t0=$(date +%s%3N)
  sent=$("$(_svix_tools)/svix-bench" send "$SVIX_URL" "$SVIX_TOKEN" "$app" "$messages" "$clients")
  # Until all are in, or nothing more arrived for SVIX_STALL_SECS (60).
  while :; do
    got=$(curl -fs "$SVIX_RECEIVER/count")
    [ "$got" -ge "$want" ] && break
    if [ "$got" = "$prev" ]; then
      still=$((still + 1))
      [ "$still" -ge $((${SVIX_STALL_SECS:-60} * 10)) ] && break
    else
      still=0 prev=$got
    fi
    sleep 0.1
  done
  sleep 1
  s=$(curl -fs "$SVIX_RECEIVER/stats")
  cpu1=$(_svix_cpu_snapshot)
  last=$(echo "$s" | _svix_field last_unix_ms)
  got=$(echo "$s" | _svix_field delivered); dup=$(echo "$s" | _svix_field duplicates); bad=$(echo "$s" | _svix_field bad_signatures)
  secs=$(python3 -c "print(max($last - $t0, 1) / 1000)")
  printf 'svix %3s endpoints/app: %6s messages -> %6s deliveries in %6.2f s = %7.0f deliveries/s  lost %s dup %s bad-sig %s  (%s; CPU s: %s)\n' \
    "$n" "$messages" "$got" "$secs" "$(python3 -c "print($got / $secs)")" "$((want - got))" "$dup" "$bad" "$sent" \
    "$(_svix_cpu_delta "$cpu0" "$cpu1")"
}

# A number field of the receiver's one-line JSON, as bench-webhooks.sh reads it.
_svix_field() { sed -E "s/.*\"$1\":([^,}]*).*/\1/"; }

svix_stop() {
  local p
  # svix-server shuts down gracefully on SIGTERM, and may hang doing so
  # (its workers waiting on the queue): KILL after 10 s.
  for p in "$SVIX_RECEIVER_PID" "$SVIX_PID"; do
    if [ -n "$p" ]; then
      kill "$p" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    fi
  done
  if [ -n "$SVIX_DIR" ] && [ -n "${PGH:-}" ]; then
    psql -h "$PGH" -p "$PGP" -U postgres -qc "DROP DATABASE IF EXISTS $SVIX_DB WITH (FORCE)" 2>/dev/null || true
  fi
  if [ -n "$SVIX_REDIS_PID" ]; then kill "$SVIX_REDIS_PID" 2>/dev/null || true; wait "$SVIX_REDIS_PID" 2>/dev/null || true; fi
  if [ -n "$SVIX_DIR" ]; then rm -rf "$SVIX_DIR"; fi
  SVIX_PID= SVIX_REDIS_PID= SVIX_RECEIVER_PID= SVIX_DIR=
}
