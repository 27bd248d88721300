# Sourced by the benchmarks that run identity, org-billing and the gateway as
# three processes of their own (bench-auth, bench-ledger, bench-rss,
# bench-billing-run, bench-oidc): the
# dev profile, production logging (scripts/lib/bench-logging.sh), each service
# as its own Postgres role on database $2 (made through the admin URL on
# start), and NATS subjects and streams of the benchmark's own.
#
#   bench_three_env HOST:PORT DATABASE NAME   (NAME: subject prefix NAME., stream suffix _NAME)
bench_three_env() {
  local pg=$1 db=$2 name=$3 v
  export HUB_PROFILE=dev
  . scripts/lib/bench-logging.sh
  bench_logging IDENTITY ORG_BILLING CORE_API_GATEWAY
  export IDENTITY__DATABASE__URL="postgres://hub_identity@$pg/$db" ORG_BILLING__DATABASE__URL="postgres://hub_org_billing@$pg/$db"
  export IDENTITY__DATABASE__ADMIN_URL="postgres://postgres@$pg/$db" ORG_BILLING__DATABASE__ADMIN_URL="postgres://postgres@$pg/$db"
  for v in IDENTITY ORG_BILLING CORE_API_GATEWAY; do
    export "${v}__NATS__SUBJECT_PREFIX=$name." "${v}__NATS__STREAM_SUFFIX=_$name"
  done
}

# A process's resident memory in MB (bench-auth, bench-rss).
rss_mb() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
