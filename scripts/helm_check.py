"""helm lint (via helm-sdkpy) plus checks that every enabled service gets what
production needs. Exits non-zero on any failure."""
import asyncio
import pathlib
import shutil
import sys
import tempfile

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

# The declared catalog: empty by default, rendered into a ConfigMap that the
# migration Jobs of org-billing and server-product (and only they) mount.
catalog = values.get("catalog")
if not isinstance(catalog, dict) or catalog.get("distributors") != [] or catalog.get("skus") != []:
    failures.append("values.catalog must have distributors: [] and skus: [] by default")
if "kind: ConfigMap" not in (chart / "templates" / "catalog-configmap.yaml").read_text():
    failures.append("templates/catalog-configmap.yaml renders no ConfigMap")
if "__CATALOG__FILE" not in (chart / "templates" / "migrate-job.yaml").read_text():
    failures.append("the migration Jobs do not set <PREFIX>__CATALOG__FILE")
with_catalog = sorted(n for n, s in values["services"].items() if s.get("catalog"))
if with_catalog != ["org-billing", "server-product"]:
    failures.append(f"catalog: true must be set on org-billing and server-product (is on {with_catalog})")
for name in with_catalog:
    if not values["services"][name].get("migrate"):
        failures.append(f"service {name} applies the catalog but runs no migration Job")

# Lint once more with the example catalog filled in (ci/*-values.yaml), so
# that the templates render real entries, not only the empty defaults.
for extra in sorted((chart / "ci").glob("*-values.yaml")):
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / chart.name
        shutil.copytree(chart, copy)
        merged = dict(values)
        merged.update(yaml.safe_load(extra.read_text()))
        (copy / "values.yaml").write_text(yaml.safe_dump(merged, allow_unicode=True))
        r = asyncio.run(helm.Lint(helm.Configuration()).run(str(copy)))
        for m in r.get("Messages") or []:
            if m.get("Severity", 0) >= 2:
                failures.append(f"helm lint with {extra.name}: {m.get('Path')}: {m.get('Err')}")
        if r.get("Errors"):
            failures.append(f"helm lint with {extra.name} reported errors: {r['Errors']}")

if failures:
    print("helm check FAILED:")
    for f in failures:
        print("  -", f)
    sys.exit(1)
print(f"helm check: chart {chart} lints clean; {len(values['services'])} services checked")
