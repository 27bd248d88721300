#!/usr/bin/env bash
# proto-docs/openapi.yaml validates against the OpenAPI 3.1 schema
# (openapi-spec-validator, pinned, installed once into ~/.cache/hub-openapi-venv,
# HUB_OPENAPI_VENV), and no YAML flow mapping in it holds a key without a value:
# `{ description: the charge (qty 1, source staff), ... }` parses the comma as the
# end of the description and `source staff)` as a second key, which the schema
# refuses in a response but allows (and ignores) inside a schema object.
# Run by `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${HUB_OPENAPI_VENV:-$HOME/.cache/hub-openapi-venv}
VALIDATOR=0.9.0
if [ ! -x "$VENV/bin/openapi-spec-validator" ] || ! "$VENV/bin/python" - "$VALIDATOR" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(version("openapi-spec-validator") != sys.argv[1])
PY
then
  echo "openapi-check: installing openapi-spec-validator $VALIDATOR into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "openapi-spec-validator==$VALIDATOR"
fi
"$VENV/bin/openapi-spec-validator" proto-docs/openapi.yaml
"$VENV/bin/python" - proto-docs/openapi.yaml <<'PY'
import sys
import yaml

bad = []


def walk(node, path):
    if isinstance(node, dict):
        for key, value in node.items():
            if value is None and isinstance(key, str):
                bad.append(f"{'/'.join(path)}: key {key!r} has no value (a comma in an unquoted flow value?)")
            walk(value, path + [str(key)])
    elif isinstance(node, list):
        for i, item in enumerate(node):
            walk(item, path + [str(i)])


walk(yaml.safe_load(open(sys.argv[1])), [])
if bad:
    print("openapi-check FAILED:")
    print("\n".join("  - " + b for b in bad))
    sys.exit(1)
print("openapi-check: no key without a value")
PY
