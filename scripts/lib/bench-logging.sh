# Sourced by the benchmarks (scripts/bench-*.sh): how the services they start
# log. By default as production does: JSON lines, level info, the access log on
# (one line per request in the gateway and one in the service), whatever the
# dev profile's own logging says. LOG=off is the explicit, labelled second
# figure: RUST_LOG=warn, no access log; it is never the headline.
#
#   bench_logging SERVICE_ENV_PREFIX...   (IDENTITY ORG_BILLING CORE_API_GATEWAY ...)
#   prints "$LOG_LABEL", so that every report says which logging it measured.
bench_logging() {
  LOG=${LOG:-on}
  local v
  case "$LOG" in
    on)
      unset RUST_LOG
      for v in "$@"; do
        export "${v}__TELEMETRY__LOG_FORMAT=json" "${v}__TELEMETRY__LOG_LEVEL=info" "${v}__TELEMETRY__ACCESS_LOG=true"
      done
      LOG_LABEL="logging: production (JSON, info, access log on)"
      ;;
    off)
      export RUST_LOG=warn
      for v in "$@"; do
        export "${v}__TELEMETRY__LOG_FORMAT=json" "${v}__TELEMETRY__ACCESS_LOG=false"
      done
      LOG_LABEL="logging: OFF (LOG=off: RUST_LOG=warn, no access log; a second figure, not what production runs)"
      ;;
    *)
      echo "LOG must be on (the default: production logging) or off" >&2
      exit 2
      ;;
  esac
  export LOG LOG_LABEL
  echo "$LOG_LABEL"
}
