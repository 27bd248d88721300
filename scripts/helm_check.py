"""helm lint (via helm-sdkpy) plus checks that every enabled service gets what
production needs, then the chart as a cluster would read it (rendered_checks.py
beside this file): rendered with `helm template` (HELM) with the default
values, values-production.yaml and a dev set, every object validated against
the Kubernetes API schemas, every pod spec against Pod Security "restricted",
the hook order, the NetworkPolicies against the calls the services declare
(the console reaches the gateways and nothing else; with the Ingress on, only
its controller reaches the gateways and the console, and the console the
gateways), the Ingress (each host to its gateway, the console's to the
console; refused without trustedProxies), production's
trusted proxies narrow (never 10.0.0.0/8) and MFA required for staff, every pod's NATS
user and password against files/nats-authorization.conf, and checkov (the
second half of this file). Exits non-zero on any failure.

    helm_check.py CHART   (HELM=/path/to/helm)
"""
import asyncio
import os
import pathlib
import shutil
import sys
import tempfile

import helm_sdkpy as helm
import yaml

# --- The chart as a cluster reads it -------------------------------------------
# Everything below works on `helm template` output, never on the template text.

import ipaddress  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402

import kubernetes_validate  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The oldest Kubernetes the chart supports with every option on (preStop
# sleepAction needs 1.30) and a current one; kubernetes-validate is pinned in
# scripts/helm-check.sh and ships their schemas.
KUBE_VERSIONS = ["1.30.0", "1.35.0"]
NAMESPACE = "hub"
# /readyz checks Postgres in up to this many seconds: the probe must wait longer.
READYZ_CHECK_SECONDS = 2
# A release name as long as Helm allows (53): every name must still fit in 63.
LONG_RELEASE = "hub-" + "x" * 49
# The dev render: every optional part on, env values of every scalar type.
DEV_VALUES = {
    "secrets": {"create": True, "values": {"nats-url": "nats://nats:4222", "port-as-number": 4222}},
    "tls": {"extraCA": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
    "imagePullSecrets": [{"name": "regcred"}],
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus"}}},
    # Workers from a CPU limit (1500m: 2) and from an explicit value.
    "services": {"identity": {"resources": {"limits": {"cpu": "1500m", "memory": "256Mi"}}},
                 "kyc": {"workers": 3},
                 "agent": {"env": {
        "AGENT__CHECK__INT": 100000000, "AGENT__CHECK__FLOAT": 1.5,
        "AGENT__CHECK__BOOL": True, "AGENT__CHECK__RELEASE": "{{ .Release.Name }}-x"}}},
}
DEV_ENV_EXPECTED = {"AGENT__CHECK__INT": "100000000", "AGENT__CHECK__FLOAT": "1.5",
                    "AGENT__CHECK__BOOL": "true", "AGENT__CHECK__RELEASE": f"{LONG_RELEASE}-x"}
WORKLOADS = ("Deployment", "Job", "StatefulSet", "DaemonSet", "ReplicaSet", "CronJob", "Pod")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def helm_template(helm_bin, chart, release, values_files):
    args = [helm_bin, "template", release, str(chart), "--namespace", NAMESPACE]
    for f in values_files:
        args += ["-f", str(f)]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-2000:])
    return p.stdout, [d for d in yaml.safe_load_all(p.stdout) if d]


def pod_spec(doc):
    if doc["kind"] == "Pod":
        return doc["metadata"], doc["spec"]
    if doc["kind"] == "CronJob":
        t = doc["spec"]["jobTemplate"]["spec"]["template"]
    else:
        t = doc["spec"]["template"]
    return t.get("metadata") or {}, t["spec"]


def containers(spec):
    return [c for k in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(k) or []]


# Pod Security Standards, "restricted" (which includes "baseline"), as
# published for Kubernetes 1.30+:
# https://kubernetes.io/docs/concepts/security/pod-security-standards/
PSS_BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                     "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
PSS_SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                    "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                    "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
PSS_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
               "persistentVolumeClaim", "projected", "secret"}
PSS_SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def pss_restricted(meta, spec):
    """The violations of the restricted profile in one pod spec."""
    bad = []
    psc = spec.get("securityContext") or {}
    for f in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(f):
            bad.append(f"{f}: true")
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= PSS_VOLUMES:
            bad.append(f"volume {v['name']} of type {sorted(kinds - PSS_VOLUMES)}")
    for s in psc.get("sysctls") or []:
        if s.get("name") not in PSS_SAFE_SYSCTLS:
            bad.append(f"unsafe sysctl {s.get('name')}")
    for k, v in (meta.get("annotations") or {}).items():
        if k.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
                v == "runtime/default" or v.startswith("localhost/")):
            bad.append(f"AppArmor annotation {k}: {v}")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    pod_nonroot = psc.get("runAsNonRoot")
    if pod_seccomp not in (None, "RuntimeDefault", "Localhost"):
        bad.append(f"pod seccompProfile {pod_seccomp}")
    if psc.get("runAsUser") == 0:
        bad.append("pod runAsUser 0")
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        bad.append("pod windowsOptions.hostProcess")
    if (psc.get("appArmorProfile") or {}).get("type") == "Unconfined":
        bad.append("pod appArmorProfile Unconfined")
    for scope, sc in [("pod", psc)] + [(c["name"], c.get("securityContext") or {}) for c in containers(spec)]:
        se = sc.get("seLinuxOptions") or {}
        if se.get("type", "") not in PSS_SELINUX_TYPES or se.get("user") or se.get("role"):
            bad.append(f"{scope}: seLinuxOptions {se}")
    for c in containers(spec):
        n, sc = c["name"], c.get("securityContext") or {}
        if sc.get("privileged"):
            bad.append(f"{n}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{n}: allowPrivilegeEscalation is not false")
        if sc.get("runAsNonRoot") is False or (sc.get("runAsNonRoot") is None and pod_nonroot is not True):
            bad.append(f"{n}: runAsNonRoot is not true (pod or container)")
        if sc.get("runAsUser") == 0:
            bad.append(f"{n}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp is None and pod_seccomp is None:
            bad.append(f"{n}: no seccompProfile (pod or container) of RuntimeDefault or Localhost")
        elif seccomp not in (None, "RuntimeDefault", "Localhost"):
            bad.append(f"{n}: seccompProfile {seccomp}")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            bad.append(f"{n}: capabilities do not drop ALL")
        added = set(caps.get("add") or [])
        if added - {"NET_BIND_SERVICE"}:
            bad.append(f"{n}: adds capabilities {sorted(added - {'NET_BIND_SERVICE'})}")
        if sc.get("procMount") not in (None, "Default"):
            bad.append(f"{n}: procMount {sc['procMount']}")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            bad.append(f"{n}: windowsOptions.hostProcess")
        if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
            bad.append(f"{n}: appArmorProfile Unconfined")
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                bad.append(f"{n}: hostPort {p['hostPort']}")
    return bad


def hook_of(doc):
    a = (doc.get("metadata") or {}).get("annotations") or {}
    if "helm.sh/hook" not in a:
        return None
    return {"events": {e.strip() for e in a["helm.sh/hook"].split(",")},
            "weight": int(a.get("helm.sh/hook-weight", "0")),
            "delete": {e.strip() for e in a.get("helm.sh/hook-delete-policy", "").split(",") if e.strip()}}


def pod_reads(spec):
    """(kind, name, optional) of every Secret, ConfigMap and ServiceAccount a pod needs."""
    out = [("ServiceAccount", spec.get("serviceAccountName") or "default", False)]
    for c in containers(spec):
        for e in c.get("env") or []:
            src = (e.get("valueFrom") or {})
            for key, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                if key in src:
                    out.append((kind, src[key]["name"], bool(src[key].get("optional"))))
        for e in c.get("envFrom") or []:
            for key, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
                if key in e:
                    out.append((kind, e[key]["name"], bool(e[key].get("optional"))))
    for v in spec.get("volumes") or []:
        if "secret" in v:
            out.append(("Secret", v["secret"]["secretName"], bool(v["secret"].get("optional"))))
        if "configMap" in v:
            out.append(("ConfigMap", v["configMap"]["name"], bool(v["configMap"].get("optional"))))
        for s in (v.get("projected") or {}).get("sources") or []:
            for key, kind in (("secret", "Secret"), ("configMap", "ConfigMap")):
                if key in s:
                    out.append((kind, s[key]["name"], bool(s[key].get("optional"))))
    for s in spec.get("imagePullSecrets") or []:
        out.append(("Secret", s["name"], True))
    return out


def check_hooks(label, docs, fail):
    """No hook reads an object created after it: what a pre-install Job reads
    and the chart renders is a hook of the same events and a lower weight; a
    hook object that Deployments read is never deleted after the hooks."""
    by_key = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    for d in docs:
        if d["kind"] not in WORKLOADS:
            continue
        hook = hook_of(d)
        _, spec = pod_spec(d)
        for kind, name, optional in pod_reads(spec):
            obj = by_key.get((kind, name))
            if obj is None:
                continue  # not the chart's: it must exist before the install
            theirs = hook_of(obj)
            what = f"{label}: {d['kind']} {d['metadata']['name']} reads {kind} {name}"
            if hook is not None:
                if theirs is None:
                    fail(f"{what}, created after it (not a hook; the hook runs before the release's resources)")
                elif not hook["events"] <= theirs["events"]:
                    fail(f"{what}, a hook only on {sorted(theirs['events'])} (the reader runs on {sorted(hook['events'])})")
                elif theirs["weight"] >= hook["weight"]:
                    fail(f"{what}, of hook weight {theirs['weight']}, not created before it (weight {hook['weight']})")
            elif theirs is not None and theirs["delete"] & {"hook-succeeded", "hook-failed"}:
                fail(f"{what}, a hook deleted after the hooks ({sorted(theirs['delete'])})")


def check_workloads(label, docs, values, fail):
    by_key = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    secret_rendered = any(d["kind"] == "Secret" for d in docs)
    for d in docs:
        name = d["metadata"]["name"]
        if not DNS_LABEL.fullmatch(name) or len(name) > 63:
            fail(f"{label}: {d['kind']} name {name!r} is not a DNS label of at most 63 characters")
        if d["kind"] not in WORKLOADS:
            continue
        meta, spec = pod_spec(d)
        where = f"{label}: {d['kind']} {name}"
        for v in pss_restricted(meta, spec):
            fail(f"{where}: Pod Security restricted: {v}")
        if spec.get("automountServiceAccountToken") is not False:
            fail(f"{where}: automountServiceAccountToken is not false on the pod")
        sa = spec.get("serviceAccountName") or "default"
        if values["serviceAccount"]["create"]:
            acct = by_key.get(("ServiceAccount", sa))
            if acct is None:
                fail(f"{where}: ServiceAccount {sa} is not rendered")
            elif acct.get("automountServiceAccountToken") is not False:
                fail(f"{where}: ServiceAccount {sa} mounts its token")
        for c in containers(spec):
            res = c.get("resources") or {}
            if not (res.get("requests") or {}).get("cpu") or not (res.get("requests") or {}).get("memory") \
                    or not (res.get("limits") or {}).get("memory"):
                fail(f"{where}: container {c['name']} lacks cpu/memory requests or a memory limit")
            for e in c.get("env") or []:
                if "value" in e and not isinstance(e["value"], str):
                    fail(f"{where}: env {e['name']} is not a string: {e['value']!r}")
                # A URL of a service in the namespace names one of its Services.
                m = re.fullmatch(r"https?://([a-z0-9-]+):(\d+)(/.*)?", str(e.get("value")))
                if m and m[1] != "localhost":
                    svc = by_key.get(("Service", m[1]))
                    if svc is None or int(m[2]) not in [p["port"] for p in svc["spec"]["ports"]]:
                        fail(f"{where}: env {e['name']} = {e['value']} names no rendered Service and port")
        if secret_rendered and "checksum/secret" not in (meta.get("annotations") or {}):
            fail(f"{where}: no checksum/secret annotation (pods would not roll when the Secret changes)")
        if d["kind"] == "Job" and spec.get("restartPolicy") not in ("Never", "OnFailure"):
            fail(f"{where}: restartPolicy {spec.get('restartPolicy')}")
        if d["kind"] != "Deployment":
            continue
        c = spec["containers"][0]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            if probe not in c:
                fail(f"{where}: no {probe}")
        if (c.get("readinessProbe") or {}).get("timeoutSeconds", 1) <= READYZ_CHECK_SECONDS:
            fail(f"{where}: readinessProbe.timeoutSeconds must exceed /readyz's own {READYZ_CHECK_SECONDS} s")
        pre = ((c.get("lifecycle") or {}).get("preStop") or {})
        pause = (pre.get("sleep") or {}).get("seconds")
        if pause is None and (pre.get("exec") or {}).get("command", [None])[0] == "sleep":
            pause = int(pre["exec"]["command"][1])
        if not pause:
            fail(f"{where}: no preStop pause")
        elif spec.get("terminationGracePeriodSeconds", 30) < pause + 10:
            fail(f"{where}: terminationGracePeriodSeconds < preStop {pause} s + 10 s of draining")
        keys = {t.get("topologyKey") for t in spec.get("topologySpreadConstraints") or []}
        if values["topologySpread"]["enabled"] and "kubernetes.io/hostname" not in keys:
            fail(f"{where}: no topology spread over kubernetes.io/hostname")


# Custom resources the chart may render: no Kubernetes schema has them, so
# check_service_monitors reads them instead.
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def check_service_monitors(label, docs, fail):
    """Each ServiceMonitor selects exactly one rendered Service, whose port it
    names and whose metrics port targets the pods' `metrics` container port."""
    services = [d for d in docs if d["kind"] == "Service"]
    for m in (d for d in docs if (d["apiVersion"], d["kind"]) in CUSTOM_KINDS):
        name = m["metadata"]["name"]
        picked = [s for s in services if selects(m["spec"]["selector"], s["metadata"].get("labels") or {})]
        if len(picked) != 1:
            fail(f"{label}: ServiceMonitor {name} selects {len(picked)} Services")
            continue
        ports = {p.get("name"): p for p in picked[0]["spec"]["ports"]}
        for e in m["spec"]["endpoints"]:
            p = ports.get(e["port"])
            if p is None or p.get("targetPort") != "metrics":
                fail(f"{label}: ServiceMonitor {name} scrapes port {e['port']!r}, not the Service's metrics port")


def expected_workers(svc):
    """What hub.workers gives: workers, else the CPU limit, else the request,
    rounded up, at least 1."""
    res = svc.get("resources") or {}
    cpu = str(svc.get("workers") or (res.get("limits") or {}).get("cpu")
              or (res.get("requests") or {}).get("cpu") or 1)
    cores = int(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
    return str(max(1, -int(-cores // 1)))


def check_workers(label, docs, values, fail):
    """Every Deployment sizes its actix and tokio workers from its CPU share."""
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        name = pod_spec(d)[0]["labels"].get("app.kubernetes.io/name")
        want = expected_workers(values["services"][name])
        env = {e["name"]: e.get("value") for e in pod_spec(d)[1]["containers"][0].get("env") or []}
        got = {k: v for k, v in env.items() if k.endswith("__WORKERS") or k == "TOKIO_WORKER_THREADS"}
        if "TOKIO_WORKER_THREADS" not in got or not any(k.endswith("__HTTP__WORKERS") for k in got) \
                or set(got.values()) != {want}:
            fail(f"{label}: Deployment {d['metadata']['name']} workers {got}, want {want} everywhere")


def check_schemas(label, docs, fail):
    for d in docs:
        if (d["apiVersion"], d["kind"]) in CUSTOM_KINDS:
            continue
        for v in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(d, v, strict=True)
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                fail(f"{label}: {d['kind']} {d['metadata']['name']} is invalid for Kubernetes {v}: {path}: {e.message}")
            except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
                fail(f"{label}: {d['kind']} {d['metadata']['name']}: no schema for Kubernetes {v}: {e}")


# --- NetworkPolicies, evaluated -------------------------------------------------

def selects(selector, labels):
    """A LabelSelector (matchLabels and matchExpressions) against labels."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(k) not in vals or op == "NotIn" and labels.get(k) in vals \
                or op == "Exists" and k not in labels or op == "DoesNotExist" and k in labels:
            return False
    return True


def peer_matches(peer, dst):
    """dst: {"ip": str} outside the cluster, or {"ns": labels, "pod": labels}."""
    if "ipBlock" in peer:
        if "ip" not in dst:
            return False  # pod addresses: this check reads ipBlocks as outside the cluster
        ip = ipaddress.ip_address(dst["ip"])
        net = ipaddress.ip_network(peer["ipBlock"]["cidr"])
        return ip.version == net.version and ip in net and not any(
            ip.version == ipaddress.ip_network(x).version and ip in ipaddress.ip_network(x)
            for x in peer["ipBlock"].get("except") or [])
    if "ip" in dst:
        return False
    ns_ok = selects(peer["namespaceSelector"], dst["ns"]) if "namespaceSelector" in peer \
        else dst["ns"].get("kubernetes.io/metadata.name") == NAMESPACE
    return ns_ok and selects(peer.get("podSelector") or {}, dst["pod"])


def port_matches(ports, port, proto, pod_ports):
    if not ports:
        return True
    for p in ports:
        want = p.get("port")
        want = pod_ports.get(want, want)
        if p.get("protocol", "TCP") == proto and (want is None or want == port
                                                    or p.get("endPort") and want <= port <= p["endPort"]):
            return True
    return False


class Net:
    def __init__(self, docs):
        self.policies = [d for d in docs if d["kind"] == "NetworkPolicy"]

    def _of(self, labels, kind):
        return [p for p in self.policies
                if selects(p["spec"].get("podSelector") or {}, labels)
                and kind in (p["spec"].get("policyTypes") or ["Ingress"])]

    def isolated(self, labels):
        return bool(self._of(labels, "Ingress")) and bool(self._of(labels, "Egress"))

    def egress(self, src, dst, port, proto="TCP", dst_ports=None):
        for p in self._of(src, "Egress"):
            for r in p["spec"].get("egress") or []:
                if port_matches(r.get("ports"), port, proto, dst_ports or {}) and (
                        "to" not in r or any(peer_matches(x, dst) for x in r["to"])):
                    return True
        return False

    def ingress(self, src, dst, port, dst_ports):
        """From a pod labelled `src` of the release's namespace."""
        return self.ingress_from({"ns": {"kubernetes.io/metadata.name": NAMESPACE}, "pod": src},
                                 dst, port, dst_ports)

    def ingress_from(self, src, dst, port, dst_ports):
        """From `src` ({"ns": labels, "pod": labels} or {"ip": ...})."""
        for p in self._of(dst, "Ingress"):
            for r in p["spec"].get("ingress") or []:
                if port_matches(r.get("ports"), port, "TCP", dst_ports) and (
                        "from" not in r or any(peer_matches(x, src) for x in r["from"])):
                    return True
        return False



def stack_calls():
    """(caller, callee) by assertion name, from each service's description
    (`const CALLS` in the `impl Service` of services/<crate>/src/lib.rs, whose
    entries name the callee and its settings section, the callee's assertion
    name); the caller's assertion name is its crate's, with `_` for `-`."""
    calls = set()
    for lib in sorted((ROOT / "services").glob("*/src/lib.rs")):
        src = lib.read_text()
        c = re.search(r"const CALLS:[^=]*=\s*&\[(.*?)\];", src, re.S)
        if not c:
            continue
        caller = lib.parent.parent.name.replace("-", "_")
        for callee in re.findall(r',\s*"(\w+)"\s*,?\s*\)', c.group(1)):
            calls.add((caller, callee))
    return calls


def sample_destination(peers, fallback_ip):
    """An address the first of `peers` admits (any address when there are none)."""
    if not peers:
        return {"ip": fallback_ip}
    p = peers[0]
    if "ipBlock" in p:
        net = ipaddress.ip_network(p["ipBlock"]["cidr"])
        return {"ip": str(net[1] if net.num_addresses > 2 else net[0])}
    ns = (p.get("namespaceSelector") or {}).get("matchLabels") or {"kubernetes.io/metadata.name": NAMESPACE}
    return {"ns": dict(ns), "pod": dict((p.get("podSelector") or {}).get("matchLabels") or {})}


def check_network(label, docs, values, fail):
    if not values["networkPolicy"]["enabled"]:
        return
    np_values = values["networkPolicy"]
    net = Net(docs)
    pods = {}
    for d in docs:
        if d["kind"] in ("Deployment", "Job"):
            meta, spec = pod_spec(d)
            c = spec["containers"][0]
            pods[d["metadata"]["name"]] = {
                "labels": meta.get("labels") or {},
                "kind": (meta.get("labels") or {}).get("hub.example.com/kind"),
                "service": (meta.get("labels") or {}).get("app.kubernetes.io/name"),
                "ports": {p["name"]: p["containerPort"] for p in c.get("ports") or [] if "name" in p},
                "port": next((p["containerPort"] for p in c.get("ports") or []), None)}
    for name, p in pods.items():
        if not net.isolated(p["labels"]):
            fail(f"{label}: pod of {name} is not isolated for both ingress and egress")
    svc_values = {n: s for n, s in values["services"].items() if s.get("enabled")}
    assertion = {s.get("assertionName"): n for n, s in svc_values.items() if s.get("assertionName")}
    calls = {(assertion[a], assertion[b]) for a, b in stack_calls() if a in assertion and b in assertion}
    if not calls:
        fail(f"{label}: no call found in the services' descriptions (const CALLS)")
    deployments = {p["service"]: p for p in pods.values() if p["kind"] in ("gateway", "internal", "console")}
    # With the Ingress on, the gateways and the console admit its controller's
    # pods (and the gateways the console's) only.
    ingress_on = bool((values.get("ingress") or {}).get("enabled"))
    controller = (values.get("ingress") or {}).get("controller") or {}
    controller_src = {"ns": dict((controller.get("namespaceSelector") or {}).get("matchLabels") or {}),
                      "pod": dict((controller.get("podSelector") or {}).get("matchLabels") or {})}
    for dst_svc, dst in deployments.items():
        if dst["kind"] not in ("gateway", "console"):
            continue
        got = any(port_matches(r.get("ports"), dst["port"], "TCP", dst["ports"]) and (
            "from" not in r or any(peer_matches(x, controller_src) for x in r["from"]))
            for pol in net._of(dst["labels"], "Ingress") for r in pol["spec"].get("ingress") or [])
        if not got:
            fail(f"{label}: the ingress controller's pods cannot reach {dst_svc}:{dst['port']}")
    # Each side on its own: the callee's ingress admits exactly the gateways
    # and its callers, the caller's egress reaches exactly its callees; the
    # console reaches the gateways only. Other pods of the namespace (not the
    # release's) and of other namespaces are admitted by the gateways and the
    # console only (without the Ingress).
    outsiders = {"a pod of another release": {"app.kubernetes.io/instance": "other"},
                 "an unlabelled pod": {}}
    for src_name, src in list(pods.items()) + [(n, {"labels": l, "kind": None, "service": None})
                                                for n, l in outsiders.items()]:
        for dst_svc, dst in deployments.items():
            if src.get("service") == dst_svc:
                continue
            want_in = (dst["kind"] in ("gateway", "console") and not ingress_on) or (
                dst["kind"] == "gateway" and src["kind"] == "console") or (
                dst["kind"] == "internal" and (src["kind"] == "gateway" or (src["service"], dst_svc) in calls))
            got_in = net.ingress(src["labels"], dst["labels"], dst["port"], dst["ports"])
            if got_in != want_in:
                fail(f"{label}: ingress of {dst_svc}:{dst['port']} from {src_name} is "
                     f"{'admitted' if got_in else 'refused'}, should be {'admitted' if want_in else 'refused'}")
            if src_name in outsiders:
                continue
            want_out = (dst["kind"] == "internal" and (src["kind"] == "gateway" or (src["service"], dst_svc) in calls)) \
                or (dst["kind"] == "gateway" and src["kind"] == "console")
            got_out = net.egress(src["labels"], {"ns": {"kubernetes.io/metadata.name": NAMESPACE},
                                                 "pod": dst["labels"]}, dst["port"], dst_ports=dst["ports"])
            if got_out != want_out:
                fail(f"{label}: egress of {src_name} to {dst_svc}:{dst['port']} is "
                     f"{'allowed' if got_out else 'denied'}, should be {'allowed' if want_out else 'denied'}")
    check_metrics_reach(label, net, values, deployments, fail)
    dns = {"ns": {"kubernetes.io/metadata.name": "kube-system"}, "pod": {"k8s-app": "kube-dns"}}
    postgres = sample_destination(np_values["postgres"]["to"], "10.20.0.5")
    nats = sample_destination(np_values["nats"]["to"], "10.20.1.5")
    smtp = sample_destination(np_values["smtp"]["to"], "198.51.100.25")
    for name, p in pods.items():
        svc = svc_values.get(p["service"]) or {}
        egress = svc.get("egress") or {}
        expect = [("DNS", dns, 53, "UDP", True),
                  ("Postgres", postgres, np_values["postgres"]["ports"][0]["port"], "TCP",
                   p["kind"] in ("internal", "migration")),
                  # Migration Jobs too: they create or update the streams. Not
                  # the console (the gateways' API only).
                  ("NATS", nats, np_values["nats"]["ports"][0]["port"], "TCP", p["kind"] != "console"),
                  ("SMTP", smtp, np_values["smtp"]["ports"][0]["port"], "TCP", bool(egress.get("smtp"))),
                  ("a public address", {"ip": "93.184.215.14"}, 443, "TCP", bool(egress.get("internet"))),
                  ("a public IPv6 address", {"ip": "2606:2800:21f:cb07::1"}, 443, "TCP", bool(egress.get("internet")))]
        for ip in ("10.1.2.3", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "127.0.0.1",
                   "fd00::1", "fe80::1"):
            expect.append((f"private {ip}", {"ip": ip}, 443, "TCP", False))
        for what, dst, port, proto, want in expect:
            got = net.egress(p["labels"], dst, port, proto)
            if got != want:
                fail(f"{label}: {name} -> {what} port {port}/{proto} is {'allowed' if got else 'denied'}, "
                     f"should be {'allowed' if want else 'denied'}")


def check_metrics_reach(label, net, values, deployments, fail):
    """The metrics port of every Deployment: admitted from metrics.from, from
    nothing else (not the release's other pods, not another release); and
    metrics.from reaches no internal service's http port through it."""
    port = values["metrics"]["port"]
    scraper = sample_destination(values["metrics"]["from"], "10.30.0.9")
    for dst_svc, dst in deployments.items():
        if dst["ports"].get("metrics") != port:
            fail(f"{label}: {dst_svc} has no container port `metrics` = {port}")
            continue
        if values["metrics"]["from"] and "pod" in scraper:
            if not Net.ingress_from(net, scraper, dst["labels"], port, dst["ports"]):
                fail(f"{label}: metrics.from cannot scrape {dst_svc}:{port}")
            if dst["kind"] == "internal" and not values["networkPolicy"]["ingressFrom"] and \
                    Net.ingress_from(net, scraper, dst["labels"], dst["port"], dst["ports"]):
                fail(f"{label}: metrics.from reaches {dst_svc}'s http port {dst['port']}")
        for src_svc, src in deployments.items():
            if src_svc != dst_svc and net.ingress(src["labels"], dst["labels"], port, dst["ports"]):
                fail(f"{label}: {src_svc} may reach {dst_svc}'s metrics port {port}")
        other = {"ns": {"kubernetes.io/metadata.name": NAMESPACE}, "pod": {"app.kubernetes.io/instance": "other"}}
        if Net.ingress_from(net, other, dst["labels"], port, dst["ports"]):
            fail(f"{label}: a pod of another release may reach {dst_svc}'s metrics port {port}")


def check_ingress(label, docs, values, fail):
    """The Ingress (when on) sends each gateway host to the gateway serving it."""
    ing = [d for d in docs if d["kind"] == "Ingress"]
    if not (values.get("ingress") or {}).get("enabled"):
        if ing:
            fail(f"{label}: an Ingress is rendered with ingress.enabled false")
        return
    if len(ing) != 1:
        fail(f"{label}: ingress.enabled renders {len(ing)} Ingresses, not one")
        return
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    routed = {}
    for rule in ing[0]["spec"].get("rules") or []:
        for path in rule["http"]["paths"]:
            b = path["backend"]["service"]
            svc = services.get(b["name"])
            if svc is None or b["port"]["number"] not in [p["port"] for p in svc["spec"]["ports"]]:
                fail(f"{label}: the Ingress sends {rule['host']} to {b['name']}:{b['port']['number']}, not a rendered Service")
            routed[rule["host"]] = b["name"]
    for name, svc in values["services"].items():
        if svc.get("enabled") and svc.get("kind") in ("gateway", "console"):
            host = values["ingress"]["hosts"]["console" if svc["kind"] == "console" else svc["serve"]]
            if not routed.get(host, "").endswith(name):
                fail(f"{label}: the Ingress does not send {host} to {name}")
    tls_hosts = {h for t in ing[0]["spec"].get("tls") or [] for h in t.get("hosts") or []}
    if label == "production" and set(routed) - tls_hosts:
        fail(f"{label}: hosts without TLS: {sorted(set(routed) - tls_hosts)}")


def check_nats_users(label, docs, values, fail):
    """Every pod connects as a NATS user of files/nats-authorization.conf
    (the Deployments as their binary, the migration Jobs as hub-admin), its
    password from nats-password-<user>; the ConfigMap carries that file. The
    console has no NATS at all."""
    if not (values.get("nats") or {}).get("users"):
        return
    conf = (ROOT / "deploy/helm/hub/files/nats-authorization.conf").read_text()
    users = set(re.findall(r'^\s*user: "([^"]+)"', conf, re.M))
    for d in docs:
        if d["kind"] not in ("Deployment", "Job"):
            continue
        env = {e["name"]: e for e in pod_spec(d)[1]["containers"][0].get("env") or []}
        user = next((e.get("value") for n, e in env.items() if n.endswith("__NATS__USER")), None)
        pw = next((e for n, e in env.items() if n.endswith("__NATS__PASSWORD")), None)
        want = "hub-admin" if d["kind"] == "Job" else None
        where = f"{label}: {d['kind']} {d['metadata']['name']}"
        if (pod_spec(d)[0].get("labels") or {}).get("hub.example.com/kind") == "console":
            if any("__NATS__" in n for n in env):
                fail(f"{where}: the console is given NATS settings")
            continue
        if user not in users or (want and user != want):
            fail(f"{where}: NATS user {user!r} is not {want or 'a user of files/nats-authorization.conf'}")
        elif ((pw or {}).get("valueFrom") or {}).get("secretKeyRef", {}).get("key") != f"nats-password-{user}":
            fail(f"{where}: the NATS password does not come from Secret key nats-password-{user}")
    cms = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("nats-authorization")]
    if values["nats"].get("authorizationConfigMap") and (
            len(cms) != 1 or cms[0]["data"]["authorization.conf"] != conf):
        fail(f"{label}: the nats-authorization ConfigMap does not carry files/nats-authorization.conf")


# The widest range production may trust for X-Forwarded-For: the ingress
# controller's pods, not a whole private range (from 10.0.0.0/8 any pod of the
# cluster could claim any client IP and take over another's per-IP limits).
NARROWEST_TRUSTED_PREFIX = {4: 24, 6: 64}


def production_env(docs):
    """Each Deployment's first container env (literal values), by Deployment name."""
    return {d["metadata"]["name"]: {e["name"]: e.get("value")
                                    for e in pod_spec(d)[1]["containers"][0].get("env") or []}
            for d in docs if d["kind"] == "Deployment"}


def check_production_security(label, docs, fail):
    """Production: the gateways trust only narrow proxy ranges (never
    10.0.0.0/8), identity requires MFA for staff (mfa.staff_required), and the
    console's cookie is Secure and its answers carry HSTS."""
    envs = production_env(docs)
    gateways = {n: e for n, e in envs.items() if any(k.startswith("CORE_API_GATEWAY__") for k in e)}
    if not gateways:
        fail(f"{label}: no gateway Deployment rendered")
    for name, env in gateways.items():
        raw = env.get("CORE_API_GATEWAY__PROXY__TRUSTED_PROXIES") or ""
        for entry in (c.strip() for c in raw.split(",") if c.strip()):
            try:
                net = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                fail(f"{label}: {name} trusts {entry!r}, neither a CIDR nor an address")
                continue
            if net.prefixlen < NARROWEST_TRUSTED_PREFIX[net.version]:
                fail(f"{label}: {name} trusts X-Forwarded-For from {entry} (wider than "
                     f"/{NARROWEST_TRUSTED_PREFIX[net.version]}): trust the ingress controller's pods only")
    identity = [e for e in envs.values() if any(k.startswith("IDENTITY__") for k in e)]
    if not identity:
        fail(f"{label}: no identity Deployment rendered")
    for env in identity:
        if str(env.get("IDENTITY__MFA__STAFF_REQUIRED")).lower() != "true":
            fail(f"{label}: identity runs without IDENTITY__MFA__STAFF_REQUIRED=true "
                 f"(staff must sign in with MFA in production)")
    consoles = [e for e in envs.values() if any(k.startswith("CONSOLE__") for k in e)]
    if not consoles:
        fail(f"{label}: no console Deployment rendered")
    for env in consoles:
        for key in ("CONSOLE__CONSOLE__SECURE_COOKIES", "CONSOLE__CONSOLE__HSTS"):
            if str(env.get(key, "true")).lower() != "true":
                fail(f"{label}: the console runs with {key}={env.get(key)} (production is served over HTTPS)")


def check_ingress_needs_trusted_proxies(helm_bin, chart, fail):
    """ingress.enabled without trustedProxies must not render."""
    p = subprocess.run([helm_bin, "template", "hub", str(chart), "--namespace", NAMESPACE,
                        "--set", "ingress.enabled=true", "--set", "trustedProxies="],
                       capture_output=True, text=True)
    if p.returncode == 0 or "needs trustedProxies" not in p.stderr:
        fail("ingress.enabled without trustedProxies renders (it must fail and say why)")


def run_checkov(renders, venv_bin, fail):
    with tempfile.TemporaryDirectory() as tmp:
        for label, (text, _, _) in renders.items():
            (pathlib.Path(tmp) / f"{label}.yaml").write_text(text)
        p = subprocess.run([str(venv_bin / "checkov"), "-d", tmp, "--framework", "kubernetes",
                            "-o", "json", "--compact", "--skip-download"],
                           capture_output=True, text=True, cwd=tmp)
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        fail(f"checkov gave no report (exit {p.returncode}): {p.stderr.strip()[-1500:]}")
        return "checkov: no report"
    out = out if isinstance(out, list) else [out]
    passed = failed = skipped = 0
    for report in out:
        r = report.get("results") or {}
        for c in r.get("failed_checks") or []:
            fail(f"checkov {c['check_id']} ({c.get('check_name')}) fails for {c['resource']} in {c['file_path']}")
        for c in r.get("skipped_checks") or []:
            reason = (c.get("check_result") or {}).get("suppress_comment") or ""
            if len(reason.split()) < 5:
                fail(f"checkov {c['check_id']} is skipped for {c['resource']} without a reason: {reason!r}")
        for e in r.get("parsing_errors") or []:
            fail(f"checkov could not parse {e}")
        s = report.get("summary") or {}
        passed, failed, skipped = passed + s.get("passed", 0), failed + s.get("failed", 0), skipped + s.get("skipped", 0)
    if passed == 0:
        fail("checkov passed no check: it read nothing")
    return f"checkov {s.get('checkov_version')}: {passed} passed, {failed} failed, {skipped} skipped (each with its reason)"


def rendered_checks(chart, helm_bin, failures):
    def fail(msg):
        failures.append(msg)

    defaults = yaml.safe_load((chart / "values.yaml").read_text())

    def merged(*layers):
        out = json.loads(json.dumps(defaults))

        def merge(a, b):
            for k, v in b.items():
                if isinstance(v, dict) and isinstance(a.get(k), dict):
                    merge(a[k], v)
                else:
                    a[k] = v
        for layer in layers:
            merge(out, layer)
        return out

    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        dev_file = pathlib.Path(tmp) / "dev-values.yaml"
        dev_file.write_text(yaml.safe_dump(DEV_VALUES))
        production = chart / "values-production.yaml"
        catalog = chart / "ci/catalog-values.yaml"
        sets = {
            "default": ("hub", []),
            "production": ("hub", [production]),
            "dev": (LONG_RELEASE, [catalog, dev_file]),
        }
        renders = {}
        for label, (release, files) in sets.items():
            try:
                text, docs = helm_template(helm_bin, chart, release, files)
            except RuntimeError as e:
                fail(f"helm template ({label}) failed: {e}")
                continue
            layers = [yaml.safe_load(f.read_text()) or {} for f in files]
            renders[label] = (text, docs, merged(*layers))
    for label, (_, docs, values) in renders.items():
        check_schemas(label, docs, fail)
        check_workloads(label, docs, values, fail)
        check_hooks(label, docs, fail)
        check_network(label, docs, values, fail)
        check_service_monitors(label, docs, fail)
        check_workers(label, docs, values, fail)
        for d in docs:
            if d["kind"] == "Deployment" and values["metrics"]["podAnnotations"]:
                ann = pod_spec(d)[0].get("annotations") or {}
                if ann.get("prometheus.io/scrape") != "true" or \
                        ann.get("prometheus.io/port") != str(values["metrics"]["port"]):
                    fail(f"{label}: Deployment {d['metadata']['name']} lacks the scrape annotations")


        check_ingress(label, docs, values, fail)
        check_nats_users(label, docs, values, fail)
        if label == "production":
            check_production_security(label, docs, fail)
        kinds = {}
        for d in docs:
            kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
        summary.append(f"{label}: {len(docs)} objects valid for Kubernetes {' and '.join(KUBE_VERSIONS)} "
                       f"(strict); {kinds.get('Deployment', 0) + kinds.get('Job', 0)} pod specs restricted; "
                       f"hooks in order; {kinds.get('NetworkPolicy', 0)} NetworkPolicies as intended")
    dev = renders.get("dev")
    if dev:
        env = {e["name"]: e.get("value") for d in dev[1] if d["kind"] == "Deployment"
               for e in pod_spec(d)[1]["containers"][0].get("env") or []}
        for k, v in DEV_ENV_EXPECTED.items():
            if env.get(k) != v:
                fail(f"dev: services.agent.env {k} renders {env.get(k)!r}, not {v!r}")
        if not any(d["kind"] == "Secret" for d in dev[1]):
            fail("dev: secrets.create renders no Secret")
    check_ingress_needs_trusted_proxies(helm_bin, chart, fail)
    summary.append(run_checkov(renders, pathlib.Path(sys.executable).parent, fail))
    return summary

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
    if svc.get("kind") not in ("gateway", "internal", "console"):
        failures.append(f"service {name}: kind must be gateway, internal or console")
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

# The chart as rendered: schemas, Pod Security, hooks, network, checkov.
summary = rendered_checks(chart, os.environ["HELM"], failures)

if failures:
    print("helm check FAILED:")
    for f in failures:
        print("  -", f)
    sys.exit(1)
print(f"helm check: chart {chart} lints clean; {len(values['services'])} services checked")
for line in summary:
    print(f"helm check: {line}")
