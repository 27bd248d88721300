"""Offline checks of deploy/compose.yaml (no container engine needed): every
service of the chart is there and runs its binary; the production profile is
the default; services wait for what they need to be healthy (migrations to
have finished); everything restarts; Postgres uses password auth and is
published on loopback at most, NATS not at all; every secret the file needs is
one scripts/compose-env.sh writes. Exits non-zero on any failure."""
import pathlib
import re
import sys

import yaml

root = pathlib.Path(__file__).resolve().parent.parent
text = (root / "deploy/compose.yaml").read_text()
compose = yaml.safe_load(text)
values = yaml.safe_load((root / "deploy/helm/hub/values.yaml").read_text())
env_script = (root / "scripts/compose-env.sh").read_text()
failures = []
services = compose["services"]

for name, svc in values["services"].items():
    if not svc.get("enabled"):
        continue
    c = services.get(name)
    if c is None:
        failures.append(f"the chart's {name} is not in compose")
        continue
    if c.get("command") != [f"/usr/local/bin/{svc['binary']}"]:
        failures.append(f"{name}: command {c.get('command')}")
    if c.get("restart") not in ("unless-stopped", "always"):
        failures.append(f"{name}: no restart policy")
    if "test" not in (c.get("healthcheck") or {}):
        failures.append(f"{name}: no healthcheck")
    if c.get("user") in (None, "0", "root") or not c.get("read_only") or c.get("cap_drop") != ["ALL"]:
        failures.append(f"{name}: must run as non-root, read-only, with no capabilities")
    env = c.get("environment") or {}
    if env.get("HUB_PROFILE") != "${HUB_PROFILE:-production}":
        failures.append(f"{name}: the production profile must be the default")
    deps = c.get("depends_on") or {}
    if not isinstance(deps, dict) or not deps:
        failures.append(f"{name}: depends_on must name conditions")
        continue
    for dep, cond in deps.items():
        want = "service_completed_successfully" if dep.endswith("-migrate") else "service_healthy"
        if (cond or {}).get("condition") != want:
            failures.append(f"{name}: depends on {dep} without condition {want}")
    if svc.get("migrate") and f"{name}-migrate" not in deps:
        failures.append(f"{name}: does not wait for {name}-migrate")
    if svc["kind"] in ("gateway", "console"):
        for port in c.get("ports") or []:
            if not str(port).startswith("${HUB_BIND:-127.0.0.1}:"):
                failures.append(f"{name}: port {port} not bound to HUB_BIND (loopback by default)")

pg = services.get("postgres") or {}
pg_env = pg.get("environment") or {}
if "trust" in str(pg_env) or "POSTGRES_PASSWORD" not in pg_env:
    failures.append("postgres must use password auth")
for port in pg.get("ports") or []:
    if not str(port).startswith("127.0.0.1:"):
        failures.append(f"postgres published beyond loopback: {port}")
if (services.get("nats") or {}).get("ports"):
    failures.append("nats must not be published")
for name in ("postgres", "nats"):
    if "test" not in ((services.get(name) or {}).get("healthcheck") or {}):
        failures.append(f"{name}: no healthcheck")

required = set(re.findall(r"\$\{(\w+):\?", text))
written = set(re.findall(r'echo "(HUB_\w+?)=', env_script))
for loop in re.findall(r'for \w+ in ([A-Z_ \\\n]+); do\n((?:    echo .*\n)+)', env_script):
    names = loop[0].replace("\\", " ").split()
    for line in loop[1].splitlines():
        if m := re.search(r'echo "(HUB_\w+_)\$\w+=', line):
            written |= {m[1] + n for n in names}
for var in sorted(required - written):
    failures.append(f"compose requires {var}, which scripts/compose-env.sh does not write")

if failures:
    print("compose check FAILED:")
    for f in failures:
        print("  -", f)
    sys.exit(1)
print(f"compose check: {len(services)} services, {len(required)} secrets from compose-env.sh")
