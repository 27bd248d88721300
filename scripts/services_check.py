#!/usr/bin/env python3
"""One place to add a service: every list of the services agrees with the one
declaration, `SERVICES` in crates/stack/src/lib.rs (each `Entry::of::<crate::Type>()`,
the gateway's entry written out).

From each declared service's own sources it reads its names: the directory
(services/<dir>, whose library is the crate), the binary and NATS user (the
settings' `SERVICE`, e.g. `org-billing`), the environment prefix (that name upper
case, `-` as `_`), the assertion name (its `hub_domain::ServiceName`, e.g.
`org_billing`), its schema (`SCHEMA`) and its port (`[http] port` in its
defaults.toml). Then it checks, both ways where a list can hold a stray entry:

- the workspace members, crates/stack's and tests-e2e's dependencies;
- hub_domain::ServiceName (the assertion names);
- deploy/Dockerfile (the packages built and the binaries copied) and
  scripts/image.sh (BINARIES);
- scripts/sqlx.sh (the crate's schema) and migrations/<schema>/;
- the Helm chart's values (an entry per service with its binary, envPrefix and
  assertionName) and the NATS users (files/nats-authorization.conf);
- deploy/compose.yaml (the service and its `-migrate` job);
- the gateway's upstream table (services/gateway/defaults.toml: the assertion
  name to http://<binary>:<port>);
- README.md (each services/<dir> is described).

The console (services/console) is not declared there: it is a front of the
gateway's public API (no schema, NATS user, assertion name or upstream). It is
written out like the gateway and checked in the image, the chart's values (its
entry with its binary, envPrefix and port, and no assertionName) and compose.

Run by `make lint`. Adding a service: its crate, its `Entry::of` line, then what
this check names.
"""
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
failures = []


def read(rel):
    return (ROOT / rel).read_text()


def fail(msg):
    failures.append(msg)


# The declaration.
stack = read("crates/stack/src/lib.rs")
decl = re.search(r"pub const SERVICES: &\[Entry\] = &\[(.*?)\n\];", stack, re.S)
if not decl:
    sys.exit("services check: no `pub const SERVICES: &[Entry]` in crates/stack/src/lib.rs")
crates = re.findall(r"Entry::of::<(\w+)::\w+>\(\)", decl.group(1))
if not crates:
    sys.exit("services check: SERVICES declares no Entry::of::<crate::Type>()")

# The assertion names hub_domain::ServiceName knows, by variant.
domain = read("crates/domain/src/service.rs")
variants = dict(re.findall(r'ServiceName::(\w+) => "(\w+)"', domain))

# Every service directory by its library's crate name.
dirs = {}
for cargo in sorted((ROOT / "services").glob("*/Cargo.toml")):
    manifest = tomllib.loads(cargo.read_text())
    lib = (manifest.get("lib") or {}).get("name") or manifest["package"]["name"].replace("-", "_")
    dirs[lib] = cargo.parent


def service(crate):
    d = dirs.get(crate)
    if d is None:
        fail(f"SERVICES names the crate {crate}, which no services/*/Cargo.toml is")
        return None
    rel = d.relative_to(ROOT).as_posix()
    settings = (d / "src/settings.rs").read_text()
    binary = re.search(r'const SERVICE: &\'static str = "([^"]+)";', settings)
    lib = (d / "src/lib.rs").read_text()
    audience = re.search(r"pub const SERVICE: &str = hub_domain::ServiceName::(\w+)\.as_str\(\);", lib)
    schema = re.search(r'pub const SCHEMA: &str = "(\w+)";', lib)
    defaults = tomllib.loads((d / "defaults.toml").read_text())
    if not (binary and audience and schema):
        fail(f"{rel}: its settings' SERVICE, its lib's SERVICE (a hub_domain::ServiceName) "
             f"and SCHEMA are what this check reads; one is missing")
        return None
    if audience.group(1) not in variants:
        fail(f"{rel}: hub_domain::ServiceName::{audience.group(1)} has no name in crates/domain/src/service.rs")
        return None
    package = tomllib.loads((d / "Cargo.toml").read_text())["package"]["name"]
    if package != binary.group(1):
        fail(f"{rel}: the package {package} and the settings' SERVICE {binary.group(1)} differ "
             f"(the binary, the image's file and the NATS user are that one name)")
    return {
        "dir": rel,
        "package": package,
        "binary": binary.group(1),
        "env": binary.group(1).upper().replace("-", "_"),
        "audience": variants[audience.group(1)],
        "schema": schema.group(1),
        "port": defaults.get("http", {}).get("port"),
    }


services = [s for s in map(service, crates) if s]
GATEWAY = {"dir": "services/gateway", "package": "core-api-gateway", "binary": "core-api-gateway",
           "env": "CORE_API_GATEWAY"}
if re.search(r'name: "gateway",\s*target: "core_api_gateway"', stack) is None:
    fail("crates/stack/src/lib.rs: the gateway's entry (name \"gateway\", target \"core_api_gateway\") is gone")

# Every services/* directory is declared (the gateway's entry is written out).
# The console is a front of the gateway's public API, not a service behind it
# (no schema, no NATS, no assertion): devstack starts it after the stack.
CONSOLE = {"dir": "services/console", "package": "console", "binary": "console", "env": "CONSOLE",
           "port": tomllib.loads(read("services/console/defaults.toml")).get("http", {}).get("port")}
declared_dirs = {s["dir"] for s in services} | {GATEWAY["dir"], CONSOLE["dir"]}
for d in dirs.values():
    rel = d.relative_to(ROOT).as_posix()
    if rel not in declared_dirs:
        fail(f"{rel} is a service crate but crates/stack's SERVICES does not declare it")

# The workspace and the crates that start the stack.
root_manifest = tomllib.loads(read("Cargo.toml"))
members = set(root_manifest["workspace"]["members"])
stack_deps = tomllib.loads(read("crates/stack/Cargo.toml"))["dependencies"]
e2e_deps = tomllib.loads(read("tests-e2e/Cargo.toml"))["dependencies"]
for s in services + [GATEWAY]:
    if s["dir"] not in members:
        fail(f"Cargo.toml: {s['dir']} is not a workspace member")
    for name, deps in (("crates/stack", stack_deps), ("tests-e2e", e2e_deps)):
        if s["package"] not in deps:
            fail(f"{name}/Cargo.toml does not depend on {s['package']}")

# ServiceName: exactly the declared services' assertion names.
if set(variants.values()) != {s["audience"] for s in services}:
    fail(f"crates/domain/src/service.rs names {sorted(variants.values())}; "
         f"SERVICES declares {sorted(s['audience'] for s in services)}")

# The image: the packages built and the binaries kept, in the Dockerfile and in
# scripts/image.sh (the console's too).
binaries = {s["binary"] for s in services} | {GATEWAY["binary"]}
image_binaries = binaries | {CONSOLE["binary"]}
dockerfile = read("deploy/Dockerfile")
built = set(re.findall(r"-p ([\w-]+)", dockerfile))
copied = re.search(r"for b in ([\w -]+); do", dockerfile)
image = re.search(r"^BINARIES=\(([^)]*)\)", read("scripts/image.sh"), re.M)
for where, have in (("deploy/Dockerfile (cargo build -p)", built),
                    ("deploy/Dockerfile (the binaries copied)", set(copied.group(1).split()) if copied else set()),
                    ("scripts/image.sh BINARIES", set(image.group(1).split()) if image else set())):
    if have != image_binaries:
        fail(f"{where}: {sorted(have)}; the declared binaries and the console are {sorted(image_binaries)}")

# Checked SQL: each service's crate with its schema, and its migrations.
sqlx = dict(re.findall(r'"(services/[\w-]+)=(\w*)"', read("scripts/sqlx.sh")))
for s in services:
    if sqlx.get(s["dir"]) != s["schema"]:
        fail(f"scripts/sqlx.sh: {s['dir']} must be checked in schema {s['schema']} (has {sqlx.get(s['dir'])})")
    if not (ROOT / "migrations" / s["schema"]).is_dir():
        fail(f"migrations/{s['schema']}/ (the migrations of {s['dir']}) does not exist")
for d in sqlx:
    if d not in {s["dir"] for s in services}:
        fail(f"scripts/sqlx.sh checks {d}, which SERVICES does not declare")

# The Helm chart: an entry per service, and its NATS user.
values = read("deploy/helm/hub/values.yaml")
entries = {}
for m in re.finditer(r"^  ([\w-]+):\n((?:    .*\n|\n)+)", values[values.index("\nservices:"):], re.M):
    body = m.group(2)
    fields = dict(re.findall(r"^    (binary|envPrefix|assertionName|port): (\S+)", body, re.M))
    if "binary" in fields:
        entries[m.group(1)] = fields
for s in services:
    e = entries.get(s["binary"])
    want = {"binary": s["binary"], "envPrefix": s["env"], "assertionName": s["audience"]}
    if e is None:
        fail(f"deploy/helm/hub/values.yaml: no services.{s['binary']} entry")
    elif {k: v for k, v in e.items() if k != "port"} != want:
        fail(f"deploy/helm/hub/values.yaml: services.{s['binary']} has {e}; want {want}")
# The console: its binary and prefix, its port, and no assertion name.
e = entries.get(CONSOLE["binary"])
want = {"binary": CONSOLE["binary"], "envPrefix": CONSOLE["env"], "port": str(CONSOLE["port"])}
if e != want:
    fail(f"deploy/helm/hub/values.yaml: services.{CONSOLE['binary']} has {e}; want {want}")
for name, e in entries.items():
    if e.get("binary") not in image_binaries:
        fail(f"deploy/helm/hub/values.yaml: services.{name} runs {e.get('binary')}, which is not declared")
nats = set(re.findall(r'user: "([\w-]+)"', read("deploy/helm/hub/files/nats-authorization.conf")))
for b in binaries:
    if b not in nats:
        fail(f"deploy/helm/hub/files/nats-authorization.conf: no NATS user {b}")

# Compose: the service and its migration job; the console on its port.
compose_text = read("deploy/compose.yaml")
compose = set(re.findall(r"^  ([\w-]+):$", compose_text, re.M))
for s in services:
    for name in (s["binary"], f"{s['binary']}-migrate"):
        if name not in compose:
            fail(f"deploy/compose.yaml: no service {name}")
console_entry = re.search(r"^  console:\n((?:    .*\n|\n)+)", compose_text, re.M)
if console_entry is None:
    fail("deploy/compose.yaml: no service console")
elif f':{CONSOLE["port"]}:{CONSOLE["port"]}"' not in console_entry.group(1) \
        or '"/usr/local/bin/console"' not in console_entry.group(1):
    fail(f"deploy/compose.yaml: the console must run /usr/local/bin/console on port {CONSOLE['port']}")

# The gateway's upstreams: every service, at its binary's host and its port.
upstreams = tomllib.loads(read("services/gateway/defaults.toml")).get("upstreams", {})
for s in services:
    want = f"http://{s['binary']}:{s['port']}"
    if upstreams.get(s["audience"]) != want:
        fail(f"services/gateway/defaults.toml [upstreams]: {s['audience']} = {upstreams.get(s['audience'])!r}; want {want!r}")
for name in upstreams:
    if name not in {s["audience"] for s in services}:
        fail(f"services/gateway/defaults.toml [upstreams] names {name}, which SERVICES does not declare")

# The README describes each one.
readme = read("README.md")
for s in services + [GATEWAY, CONSOLE]:
    if s["dir"] not in readme:
        fail(f"README.md does not mention {s['dir']}")

if failures:
    print("services check FAILED (the declaration: SERVICES in crates/stack/src/lib.rs):")
    for f in failures:
        print("  -", f)
    sys.exit(1)
print(f"services check: {len(services)} services and the gateway, declared once in crates/stack, "
      f"agree with the workspace, the image, sqlx, the chart, NATS, compose, the gateway and the README; "
      f"so does the console (the image, the chart, compose)")
