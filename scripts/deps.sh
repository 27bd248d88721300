#!/usr/bin/env bash
# Make Postgres and NATS (with JetStream) reachable at the configured addresses.
# Uses running servers when they answer; otherwise installs the Debian packages
# (postgresql, nats-server) and starts project-local instances under .local/.
#
#   PGHOST/PGPORT (default 127.0.0.1:5432), NATS_HOST/NATS_PORT (127.0.0.1:4222),
#   PG_MAX_CONNECTIONS (250: the max_connections of a Postgres started here)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LOCAL="$ROOT/.local"
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
NATS_HOST=${NATS_HOST:-127.0.0.1}
NATS_PORT=${NATS_PORT:-4222}
PG_MAX_CONNECTIONS=${PG_MAX_CONNECTIONS:-250}
PG_MIN_CONNECTIONS=${PG_MIN_CONNECTIONS:-210}

. scripts/lib/postgres.sh
log() { printf 'deps: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

apt_updated=
apt_install() {
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

wait_port() {
  for _ in $(seq 1 100); do port_open "$1" "$2" && return 0; sleep 0.2; done
  return 1
}

# --- toolchain ---------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1; then
  log "cargo not found; installing Debian's (the workspace needs Rust >= 1.89: rustup if Debian's is older)"
  apt_install cargo rustc
fi
command -v psql >/dev/null 2>&1 || apt_install postgresql-client
# identity's passkeys (webauthn-rs) verify with the system's OpenSSL: its
# headers and pkg-config to build, libssl3 to run.
if ! pkg-config --exists openssl 2>/dev/null; then
  log "installing libssl-dev and pkg-config (webauthn-rs links OpenSSL)"
  apt_install --no-install-recommends libssl-dev pkg-config
fi
# The mail tests' SMTP server (tests-e2e/smtp_sink.py) and its test CA.
if ! /usr/bin/python3 -c 'import aiosmtpd, trustme' >/dev/null 2>&1; then
  log "installing python3-aiosmtpd and python3-trustme (the tests' SMTP server)"
  apt_install python3 python3-aiosmtpd python3-trustme
fi

# `promtool check metrics` reads every service's /metrics in the metrics test
# (tests-e2e/tests/e2e/metrics.rs): Debian's prometheus package has it.
if ! command -v promtool >/dev/null 2>&1; then
  log "installing prometheus (for promtool)"
  apt_install --no-install-recommends prometheus
fi

# The billing test opens an invoice preview in headless Chromium
# (tests-e2e/tests/e2e/billing.rs).
if ! command -v chromium >/dev/null 2>&1; then
  log "installing chromium (the invoice preview test)"
  apt_install --no-install-recommends chromium
fi

# The console's browser tests (tests-e2e/tests/e2e/console.rs) drive Chromium
# through ChromeDriver (WebDriver) and run axe-core (npm, pinned by
# tests-e2e/browser/package-lock.json) in every page.
if ! command -v chromedriver >/dev/null 2>&1; then
  log "installing chromium-driver (the console's browser tests)"
  apt_install --no-install-recommends chromium-driver
fi
if ! command -v npm >/dev/null 2>&1; then
  log "installing npm (axe-core for the console's browser tests)"
  apt_install --no-install-recommends npm
fi
if [ ! -f tests-e2e/browser/node_modules/axe-core/axe.min.js ]; then
  log "installing axe-core (tests-e2e/browser, from its lock file)"
  (cd tests-e2e/browser && npm ci --no-audit --no-fund --silent)
fi

# --- Postgres ----------------------------------------------------------------
pg_ok() { psql -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; }
if pg_ok; then
  log "postgres answers at $PGHOST:$PGPORT"
else
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    log "installing postgresql"
    apt_install postgresql
  fi
  BIN=$(pg_bindir)
  DATA="$LOCAL/pgdata"
  mkdir -p "$LOCAL"
  if [ ! -f "$DATA/PG_VERSION" ]; then
    log "creating a project-local cluster in $DATA (trust auth on loopback)"
    mkdir -p "$DATA"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$DATA" "$LOCAL"
    run_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust >/dev/null
  fi
  if [ ! -f "$DATA/server.crt" ]; then
    # TLS on (tests connect with sslmode=require): a self-signed certificate
    # for localhost / 127.0.0.1, as Postgres wants it in its data directory.
    command -v openssl >/dev/null 2>&1 || apt_install openssl
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=localhost \
      -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
      -keyout "$DATA/server.key" -out "$DATA/server.crt" >/dev/null 2>&1
    chmod 600 "$DATA/server.key"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$DATA/server.key" "$DATA/server.crt"
  fi
  log "starting postgres on $PGHOST:$PGPORT"
  run_pg "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w \
    -o "-c listen_addresses=$PGHOST -p $PGPORT -k /tmp -c ssl=on -c max_connections=$PG_MAX_CONNECTIONS" start >/dev/null
  pg_ok || { log "postgres did not come up; see $DATA/server.log"; exit 1; }
fi
# Connections: the dev stack's pools hold up to about 90 (defaults.toml: identity and
# org-billing 20 each, the other four 10, org-billing's 6 ledger writers, the
# agent's journal writers); a test stack up to about 60 (8 per service, the writers,
# the harness's 4), and `make test` runs two at once. Postgres's default of 100
# is enough for either alone, not for a test run beside `make run` or a
# benchmark: the Postgres started here gets $PG_MAX_CONNECTIONS; a running one
# with fewer than $PG_MIN_CONNECTIONS is reported.
have=$(psql -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -Atqc 'show max_connections' 2>/dev/null || echo 0)
if [ "${have:-0}" -lt "$PG_MIN_CONNECTIONS" ]; then
  log "warning: postgres allows max_connections=$have; a test run beside 'make run' needs about $PG_MIN_CONNECTIONS (ALTER SYSTEM SET max_connections = $PG_MAX_CONNECTIONS, then restart it)"
fi

# --- NATS with JetStream -------------------------------------------------------
# The TLS test starts a nats-server of its own: the binary is wanted even
# when a server already answers.
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || { log "installing nats-server"; apt_install nats-server; }
if port_open "$NATS_HOST" "$NATS_PORT"; then
  log "nats answers at $NATS_HOST:$NATS_PORT"
else
  command -v nats-server >/dev/null 2>&1 || { log "installing nats-server"; apt_install nats-server; }
  mkdir -p "$LOCAL/nats"
  # The chart's authorization (deploy/helm/hub/files/nats-authorization.conf:
  # every service's user, allowed only its own subjects, and hub-admin), so
  # that the dev server enforces what production does, plus hub-dev for
  # connections without credentials (tests and `make run` connect without
  # one; they use prefixed subjects and streams of their own). Each user's
  # dev password is devonly<USER> (identity: devonlyIDENTITY, org-billing:
  # devonlyORG_BILLING), e.g. IDENTITY__NATS__USER=identity
  # IDENTITY__NATS__PASSWORD=devonlyIDENTITY runs identity as its own user.
  python3 - "$ROOT/deploy/helm/hub/files/nats-authorization.conf" "$LOCAL/nats.conf" <<'PY'
import sys
conf = open(sys.argv[1]).read()
dev = '    { user: "hub-dev", password: "devonly" }\n'
conf = conf.replace("  users = [\n", "  users = [\n" + dev, 1)
open(sys.argv[2], "w").write(conf + 'no_auth_user: "hub-dev"\n')
PY
  for v in $(grep -o 'HUB_NATS_PASSWORD_[A-Z_]*' "$LOCAL/nats.conf" | sort -u); do
    export "$v=devonly${v#HUB_NATS_PASSWORD_}"
  done
  log "starting nats-server with JetStream on $NATS_HOST:$NATS_PORT ($LOCAL/nats.conf)"
  nohup nats-server -a "$NATS_HOST" -p "$NATS_PORT" -js -sd "$LOCAL/nats" -c "$LOCAL/nats.conf" \
    >"$LOCAL/nats.log" 2>&1 &
  wait_port "$NATS_HOST" "$NATS_PORT" || { log "nats did not come up; see $LOCAL/nats.log"; exit 1; }
fi
log "ready"
