"""helm lint (via helm-sdkpy) plus checks that every enabled service gets what
production needs. Exits non-zero on any failure."""
import asyncio
import pathlib
import sys

import helm_sdkpy as helm
import yaml

chart = pathlib.Path(sys.argv[1])
failures = []

result = asyncio.run(helm.Lint(helm.Configuration()).run(str(chart)))
# Severity: 1 info, 2 warning, 3 error.
for m in result.get("Messages") or []:
    if m.get("Severity", 0) >= 2:
        failures.append(f"helm lint: severity {m['Severity']} in {m.get('Path')}: {m.get('Err')}")
if result.get("Errors"):
    failures.append(f"helm lint reported errors: {result['Errors']}")

values = yaml.safe_load((chart / "values.yaml").read_text())
templates = "\n".join(p.read_text() for p in (chart / "templates").glob("*.yaml"))
for kind in ["Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget",
             "Job", "NetworkPolicy"]:
    if f"kind: {kind}" not in templates:
        failures.append(f"no {kind} in the chart")
for probe in ["livenessProbe", "readinessProbe", "resources"]:
    if probe not in templates:
        failures.append(f"containers lack {probe}")
for name, svc in values["services"].items():
    for key in ["binary", "envPrefix", "port", "kind", "resources", "autoscaling", "pdb"]:
        if key not in svc:
            failures.append(f"service {name} lacks {key}")
    if svc.get("kind") not in ("gateway", "internal"):
        failures.append(f"service {name}: kind must be gateway or internal")
    if "limits" not in svc.get("resources", {}):
        failures.append(f"service {name} has no resource limits")
internal = {s.get("assertionName"): s for s in values["services"].values() if s.get("kind") == "internal"}
for name, svc in internal.items():
    if not name:
        failures.append("an internal service lacks assertionName")
    if name not in (values.get("upstreams") or {}):
        failures.append(f"the gateways have no upstream (and so no signing key) for {name}")
    for call in svc.get("calls") or []:
        callee = internal.get(call.get("service"))
        if callee is None or name not in (callee.get("callers") or []):
            failures.append(f"{name} calls {call.get('service')}, which does not list it as a caller")
if "TRUSTED_PROXIES" in templates and "if $.Values.trustedProxies" not in templates:
    failures.append("an empty trustedProxies must not render an empty TRUSTED_PROXIES variable")
if not any(s.get("migrate") for s in values["services"].values()):
    failures.append("no service runs migrations")

if failures:
    print("helm check FAILED:")
    for f in failures:
        print("  -", f)
    sys.exit(1)
print(f"helm check: chart {chart} lints clean; {len(values['services'])} services checked")
