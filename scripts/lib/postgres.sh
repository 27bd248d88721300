# Sourced by scripts/deps.sh and scripts/lib/bench-postgres.sh: what starting
# a Postgres cluster of our own needs, written once.

# The newest installed Postgres's bin directory.
pg_bindir() { ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1; }

# Run a Postgres command as the postgres user (initdb and postgres refuse root).
run_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
