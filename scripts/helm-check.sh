#!/usr/bin/env bash
# Offline validation of the Helm chart (no cluster here): `helm lint` through
# the Helm library bundled in the helm-sdkpy wheel, then structural checks of the
# chart's values. Installs its tools once into ~/.cache/hub-helm-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${HUB_HELM_VENV:-$HOME/.cache/hub-helm-venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import helm_sdkpy, yaml' 2>/dev/null; then
  python3 -m venv "$VENV"
  # The wheel declares Python >= 3.12 but only loads a bundled Go library through
  # cffi, which works on 3.11 too.
  "$VENV/bin/pip" install -q --ignore-requires-python 'helm-sdkpy==0.1.32' 'PyYAML>=6'
fi
"$VENV/bin/python" scripts/helm_check.py deploy/helm/hub
"$VENV/bin/python" scripts/docs_check.py
"$VENV/bin/python" scripts/compose_check.py
