"""proto-docs/openapi.yaml is OpenAPI 3.1.0, version 0.1.0, and is the code's
contract, both ways:

- every route the services register (read from their sources: the routes
  modules and the route tables of the areas they call) is documented, and every documented operation is served: by the service the
  gateway's route table (services/gateway/defaults.toml) sends its path to, or
  by the gateway itself (the probes);
- each path documents the servers that serve it: core paths the core host and
  the product host's `/core-api`, product paths the product host only;
- operations without credentials (`security: []`) are the gateway's `public`
  list (and the probes);
- every operation has a unique operationId, a tag declared in `tags`, and
  responses;
- routes are registered with service_kit::methods (so that another method on
  a served path answers 405 with Allow, not 404)."""
import pathlib
import re
import sys
import tomllib

import yaml

root = pathlib.Path(__file__).resolve().parent.parent
doc = yaml.safe_load((root / "proto-docs/openapi.yaml").read_text())
gateway = tomllib.loads((root / "services/gateway/defaults.toml").read_text())
failures = []
if doc.get("openapi") != "3.1.0":
    failures.append("openapi must be 3.1.0")
if doc.get("info", {}).get("version") != "0.1.0":
    failures.append("info.version must be 0.1.0")
paths = doc.get("paths", {})
METHODS = ("get", "post", "patch", "delete", "put")
route = re.compile(r'\.route\(\s*"([^"]+)",\s*methods::(get|post|patch|delete|put)\(\)')
bare_verb = re.compile(r'\.route\(\s*"([^"]+)",\s*web::(get|post|patch|delete|put)\(\)')
# The gateway answers these itself (service_kit::http::health_routes).
GATEWAY_LOCAL = {("get", "/healthz"), ("get", "/readyz")}
# The gateway answers these from the services' own routes of the same path,
# registered through a constant (service_kit::overview: the kit serves it on
# each; service_kit::export: identity and the agent serve their parts).
GATEWAY_GATHERED = {("get", "/v1/admin/overview"), ("get", "/v1/auth/me/export")}
registered = 0


def internal_spans(text):
    """The bodies of `assertion::internal(cfg, |c| { ... })`: routes inside
    are served under /internal to calling services only."""
    spans = []
    for m in re.finditer(r"assertion::internal\(", text):
        start = text.find("{", m.end())
        depth, i = 0, start
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        spans.append((start, i))
    return spans


def service_dir(name):
    """The directory of a service by its name in the gateway's settings."""
    return name.replace("_", "-")


# (method, path) -> the service directories that register it publicly.
served = {}
internal_registered = 0
# Every source file of every service: the routes modules, and the route
# tables of areas they call (e.g. org-billing's billing::configure).
for g in sorted(root.glob("services/*/src/**/*.rs")):
    text = g.read_text()
    service = g.relative_to(root).parts[1]
    for m in bare_verb.finditer(text):
        failures.append(
            f"{m.group(2).upper()} {m.group(1)} ({g.relative_to(root)}) is registered with "
            f"web::{m.group(2)}(): use service_kit::methods::{m.group(2)}() (405 with Allow "
            f"for the other methods)"
        )
    spans = internal_spans(text)
    for m in route.finditer(text):
        registered += 1
        # A segment's pattern (`{id:[0-9a-f-]+}`) is the OpenAPI path's `{id}`.
        path, method = re.sub(r"\{(\w+):[^}]*\}", r"{\1}", m.group(1)), m.group(2)
        if path.startswith("/internal/") or any(a <= m.start() <= b for a, b in spans):
            internal_registered += 1
            continue  # service-to-service only; documented in decisions.md
        served.setdefault((method, path), set()).add(service)
        if method not in paths.get(path, {}):
            failures.append(f"{method.upper()} {path} ({g.relative_to(root)}) is not in openapi.yaml")


def owner(table, path):
    """The service the gateway's table sends `path` to (first rule that matches)."""
    segs = [s for s in path.split("/") if s]
    for rule in table:
        want = [s for s in rule["prefix"].split("/") if s]
        if len(want) <= len(segs) and all(w in ("*", g) for w, g in zip(want, segs)):
            return rule["service"]
    return None


def server_kinds(servers):
    """Which hosts a `servers` list names: `core`, `core-api` (the product
    host's core paths) and `product`, by their variables."""
    kinds = set()
    for s in servers or []:
        url = s.get("url", "")
        if url.startswith("{base_url}"):
            kinds.add("core")
        elif url == "{brand_base_url}/core-api":
            kinds.add("core-api")
        elif url == "{brand_base_url}":
            kinds.add("product")
        else:
            kinds.add(url)
    return kinds


routes = gateway.get("routes", {})
public = {tuple(p.lower().split(" ", 1)) for p in gateway.get("proxy", {}).get("public", [])}
top_servers = server_kinds(doc.get("servers"))
if top_servers != {"core", "core-api"}:
    failures.append(f"the top-level servers must be the core host and the product host's /core-api, not {sorted(top_servers)}")
declared_tags = {t.get("name") for t in doc.get("tags", [])}
operation_ids = {}
for path, item in paths.items():
    core_owner = owner(routes.get("core", []), path)
    product_owner = owner(routes.get("product", []), path)
    if "servers" not in item:
        failures.append(f"{path} lists no servers of its own (schemathesis sends each path where its servers say)")
    item_servers = server_kinds(item.get("servers")) if "servers" in item else top_servers
    for method, op in item.items():
        if method not in METHODS:
            continue
        where = f"{method.upper()} {path}"
        if not isinstance(op, dict) or "responses" not in op:
            failures.append(f"{where} has no responses")
            continue
        op_id = op.get("operationId")
        if not op_id:
            failures.append(f"{where} has no operationId")
        elif op_id in operation_ids:
            failures.append(f"{where} has the operationId {op_id} of {operation_ids[op_id]}")
        else:
            operation_ids[op_id] = where
        tags = op.get("tags") or []
        if not tags:
            failures.append(f"{where} has no tag")
        for t in tags:
            if t not in declared_tags:
                failures.append(f"{where} has the tag {t}, not declared in tags")
        servers = server_kinds(op["servers"]) if "servers" in op else item_servers
        if (method, path) in GATEWAY_LOCAL:
            want = {"core", "product"}
        elif core_owner:
            want = {"core", "core-api"}
            if (method, path) not in GATEWAY_GATHERED and \
                    service_dir(core_owner) not in served.get((method, path), set()):
                failures.append(f"{where} is documented but {service_dir(core_owner)}, which the gateway "
                                f"routes it to, does not serve it")
        elif product_owner:
            want = {"product"}
            if service_dir(product_owner) not in served.get((method, path), set()):
                failures.append(f"{where} is documented but {service_dir(product_owner)}, which the gateway "
                                f"routes it to, does not serve it")
        else:
            failures.append(f"{where} is documented but the gateway routes it nowhere")
            continue
        if servers != want:
            failures.append(f"{where} documents the servers {sorted(servers)}; it is served on {sorted(want)}")
        anonymous = op.get("security", doc.get("security")) == []
        if anonymous != ((method, path) in public or (method, path) in GATEWAY_LOCAL):
            failures.append(f"{where}: `security: []` must match the gateway's proxy.public list")
for method, path in served:
    if core_owner := owner(routes.get("core", []), path) or owner(routes.get("product", []), path):
        if service_dir(core_owner) not in served[(method, path)]:
            failures.append(f"{method.upper()} {path} is registered by {sorted(served[(method, path)])} "
                            f"but the gateway routes it to {service_dir(core_owner)}")
    else:
        failures.append(f"{method.upper()} {path} is registered but the gateway routes it nowhere")
if failures:
    print("docs check FAILED:")
    for f in failures:
        print("  -", f)
    sys.exit(1)
print(
    f"docs check: openapi.yaml describes all {registered - internal_registered} public routes "
    f"({internal_registered} internal ones are listed in decisions.md), every documented "
    f"operation is served, on its documented servers, with its own operationId and a tag"
)
