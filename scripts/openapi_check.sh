#!/usr/bin/env bash
# proto-docs/openapi.yaml validates against the OpenAPI 3.1 schema
# (openapi-spec-validator, pinned, installed once into ~/.cache/hub-openapi-venv,
# HUB_OPENAPI_VENV), and no YAML flow mapping in it holds a key without a value:
# `{ description: the charge (qty 1, source staff), ... }` parses the comma as the
# end of the description and `source staff)` as a second key, which the schema
# refuses in a response but allows (and ignores) inside a schema object.
# Run by `make lint`.
#
#   scripts/openapi_check.sh --validate POINTER <value.json
#     prints `valid` or `invalid`: whether the JSON value (on stdin) is valid against the
#     schema at POINTER in the document (e.g. /components/schemas/KycDecision),
#     its references resolved in the document (JSON Schema 2020-12, as OpenAPI
#     3.1 reads it). The end-to-end test schema_agreement compares this with
#     what the server answers for the same value.
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
if [ "${1:-}" = "--validate" ]; then
  code='
import json
import sys

import yaml
from jsonschema import Draft202012Validator

doc = yaml.safe_load(open(sys.argv[1]))
# The document as the root resource, with a reference to the one schema: the
# schema'"'"'s own `$ref`s (#/components/...) resolve in the document.
root = dict(doc)
root["$ref"] = "#" + sys.argv[2]
for key in ("openapi", "info", "servers", "tags", "security", "webhooks"):
    root.pop(key, None)
valid = Draft202012Validator(root).is_valid(json.load(sys.stdin))
print("valid" if valid else "invalid")
'
  exec "$VENV/bin/python" -c "$code" proto-docs/openapi.yaml "${2:?POINTER}"
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
