#!/usr/bin/env bash
# Write deploy/.env for deploy/compose.yaml: fresh random keys and passwords
# (one per receiver and per caller pair, as the chart's Secret holds them).
# Refuses to overwrite an existing file: the sealing keys decrypt stored data.
#
#   scripts/compose-env.sh [--smtp-url URL] [--staff a@x,b@y]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=deploy/.env
SMTP_URL=""
STAFF=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smtp-url) SMTP_URL=$2; shift 2 ;;
    --staff) STAFF=$2; shift 2 ;;
    *) echo "usage: $0 [--smtp-url URL] [--staff emails]" >&2; exit 2 ;;
  esac
done
if [ -e "$OUT" ]; then
  echo "$OUT exists; remove it first (its sealing keys decrypt what is stored)" >&2
  exit 1
fi
key() { head -c 32 /dev/urandom | base64 | tr -d '=+/\n' | head -c 43; }
sealing() { printf 'k1:%s' "$(head -c 32 /dev/urandom | base64 | tr -d '\n')"; }
umask 077
{
  echo "# deploy/compose.yaml's secrets, made by scripts/compose-env.sh. Keep private."
  echo "HUB_PROFILE=production"
  echo "HUB_POSTGRES_PASSWORD=$(key)"
  for s in IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER AGENT; do
    echo "HUB_DB_PASSWORD_$s=$(key)"
    echo "HUB_ASSERTION_KEY_$s=$(key)"
  done
  for pair in ORG_BILLING_TO_IDENTITY AGENT_TO_IDENTITY KYC_TO_ORG_BILLING AGENT_TO_ORG_BILLING \
              ORG_BILLING_TO_KYC ORG_BILLING_TO_SERVER_PRODUCT SERVER_PRODUCT_TO_KYC AGENT_TO_KYC AGENT_TO_SERVER_PRODUCT; do
    echo "HUB_CALLER_KEY_$pair=$(key)"
  done
  for s in IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER; do
    echo "HUB_SEALING_KEYS_$s=$(sealing)"
  done
  echo "HUB_SEARCH_KEY_ORG_BILLING=$(key)"
  echo "HUB_CONSOLE_COOKIE_KEYS=$(sealing)"
  echo "HUB_SMTP_URL=$SMTP_URL"
  echo "HUB_STAFF_EMAILS=$STAFF"
} > "$OUT"
echo "wrote $OUT" >&2
