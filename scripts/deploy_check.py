#!/usr/bin/env python3
"""make deploy-check: run what the Helm chart renders, as podman containers.

    deploy_check.py --helm HELM --image IMAGE

1. Renders deploy/helm/hub with its default values, deploy/check/values.yaml
   and a values file of this run (fresh keys and URLs in the Secret, a test CA
   as tls.extraCA, NATS names of its own, the image tag).
2. Runs the migration Jobs, then one replica of every Deployment, each as a
   podman container with the rendered command, args, env (Secret and ConfigMap
   references resolved from the rendered objects), user, read-only root
   filesystem, dropped capabilities and volumes, reachable by its Service's
   name on a podman network of its own. Postgres and NATS are the host's,
   reached through relays on the network's host address; every database URL
   says sslmode=require.
3. Waits for every container's /readyz, runs the image's HEALTHCHECK in each,
   checks pg_stat_ssl, then, through the gateway containers: signs in by mail
   (a real SMTP server with STARTTLS and AUTH), creates a Turkish and a German
   organization, registers an https webhook endpoint (a receiver with a
   certificate from the test CA), orders an API-backed server and waits for it
   to become active and for its signed webhooks.
4. Scrapes every container's metrics port (where its prometheus.io
   annotations point) and checks each exposition with `promtool check metrics`.

Tears everything down at the end. Needs podman
(scripts/podman-env.sh), python3-yaml and python3-trustme.
"""

import argparse
import base64
import hashlib
import hmac
import http.server
import json
import os
import pathlib
import re
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import trustme
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy/helm/hub"
CHECK_VALUES = ROOT / "deploy/check/values.yaml"
PGHOST = os.environ.get("PGHOST", "127.0.0.1")
PGPORT = int(os.environ.get("PGPORT", "5432"))
NATS_HOST = os.environ.get("NATS_HOST", "127.0.0.1")
NATS_PORT = int(os.environ.get("NATS_PORT", "4222"))
HOST_NAME = "host.containers.internal"


def log(msg):
    print(f"deploy-check: {msg}", file=sys.stderr, flush=True)


class CheckFailed(Exception):
    pass


def ensure(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def run(*args, check=True, input=None):
    p = subprocess.run(args, capture_output=True, text=True, input=input)
    if check and p.returncode != 0:
        raise CheckFailed(f"{' '.join(args[:4])} ... exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    return p


def podman(*args, check=True):
    return run("podman", *args, check=check)


def psql(sql, db="postgres"):
    return run("psql", "-h", PGHOST, "-p", str(PGPORT), "-U", "postgres", "-d", db,
               "-Atqc", sql).stdout.strip()


# tests-e2e/src/runs.rs: RUN_LOCK_SPACE ("hubt") and the run id as the second key.
RUN_LOCK_SPACE = 0x68756274
ADMIN_DB = os.environ.get("TEST_DATABASE_URL", f"postgres://postgres@{PGHOST}:{PGPORT}/postgres")


def hold_run_lock(run_id):
    """Take the run's advisory lock on a psql session kept open until the
    check ends (its process, and with it the lock, dies with ours)."""
    key = int(run_id, 16)
    key = key - (1 << 32) if key >= 1 << 31 else key
    p = subprocess.Popen(["psql", ADMIN_DB, "-Atq", "-v", "ON_ERROR_STOP=1"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.stdin.write(f"SELECT pg_advisory_lock({RUN_LOCK_SPACE}, {key}); SELECT 'locked';\n")
    p.stdin.flush()
    for line in p.stdout:
        if line.strip() == "locked":
            return p
    raise CheckFailed("could not take the run's lock in Postgres")


# --- the host side: relays, the SMTP server, the webhook receiver -----------

class Relay:
    """A TCP relay from (host, random port) to a local server: the containers
    reach the host's Postgres and NATS, which listen on loopback only."""

    def __init__(self, host, target):
        self.target = target
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.sock.close()


class HookReceiver:
    """An https webhook receiver with a certificate from the test CA."""

    def __init__(self, host, cert_file, key_file):
        self.got = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with outer.lock:
                    outer.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert_file, key_file)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def deliveries(self):
        with self.lock:
            return list(self.got)

    def close(self):
        self.server.shutdown()


def verify_standard_webhook(secret, headers, body, tolerance=300):
    """Standard Webhooks: v1,base64(HMAC-SHA256(key, id.timestamp.body))."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    msg_id, ts = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
    ensure(ts.isdigit() and abs(time.time() - int(ts)) <= tolerance, f"webhook timestamp {ts!r}")
    want = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest())
    sigs = [s.split(",", 1)[1].encode() for s in headers.get("webhook-signature", "").split()
            if s.startswith("v1,")]
    ensure(any(hmac.compare_digest(want, s) for s in sigs), "webhook signature does not verify")


# --- rendering -----------------------------------------------------------------

def render(helm, values_files, image_tag):
    args = [helm, "template", "hub", str(CHART), "--namespace", "hub"]
    for f in values_files:
        args += ["-f", str(f)]
    args += ["--set-string", f"image.tag={image_tag}"]
    out = run(*args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def secret_keys(docs):
    """Every key of the Secret a container references, and whether optional."""
    keys = {}

    def walk(o):
        if isinstance(o, dict):
            ref = o.get("secretKeyRef")
            if isinstance(ref, dict):
                keys[ref["key"]] = keys.get(ref["key"], True) and bool(ref.get("optional"))
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(docs)
    return keys


def make_secrets(keys, db_url, nats_url, smtp_url):
    """Fresh values for every key the chart references (pairs such as
    assertion-key-X / assertion-keys-X get the same key)."""
    made = {}

    def key_for(pair_name):
        if pair_name not in made:
            made[pair_name] = secrets.token_urlsafe(32)
        return made[pair_name]

    out = {}
    for k, optional in sorted(keys.items()):
        if optional:
            continue
        if m := re.fullmatch(r"assertion-keys?-(\w+)", k):
            out[k] = key_for(f"assertion:{m[1]}")
        elif m := re.fullmatch(r"caller-keys?-(\w+)-to-(\w+)", k):
            out[k] = key_for(f"caller:{m[1]}:{m[2]}")
        elif k.endswith("-sealing-keys") or k == "console-cookie-keys":
            out[k] = "k1:" + base64.b64encode(secrets.token_bytes(32)).decode()
        elif k == "org-billing-search-key":
            out[k] = secrets.token_urlsafe(32)
        elif k == "database-admin-url":
            out[k] = db_url("postgres", None)
        elif m := re.fullmatch(r"(\w+)-database-url", k):
            out[k] = db_url(f"hub_{m[1]}", secrets.token_hex(16))
        elif k == "nats-url":
            out[k] = nats_url
        elif k.startswith("nats-password-"):
            # The host's NATS has no authorization: the users' passwords
            # are sent and ignored (a letter first, as nats-server wants).
            out[k] = "p" + secrets.token_hex(16)
        elif k == "identity-smtp-url":
            out[k] = smtp_url
        else:
            raise CheckFailed(f"the chart references Secret key {k!r}, which this check cannot fill")
    return out


# --- running the rendered objects ------------------------------------------------

class Cluster:
    def __init__(self, docs, network, workdir):
        self.docs = docs
        self.network = network
        self.workdir = workdir
        self.secrets = {}
        self.configmaps = {}
        for d in docs:
            name = d["metadata"]["name"]
            if d["kind"] == "Secret":
                data = dict(d.get("stringData") or {})
                for k, v in (d.get("data") or {}).items():
                    data[k] = base64.b64decode(v).decode()
                self.secrets[name] = data
            elif d["kind"] == "ConfigMap":
                self.configmaps[name] = dict(d.get("data") or {})
        self.containers = []

    def of_kind(self, kind):
        return [d for d in self.docs if d["kind"] == kind]

    def env(self, container, ctr_name):
        out = []
        for e in container.get("env") or []:
            if "value" in e:
                val = e["value"]
            elif "valueFrom" in e:
                src = e["valueFrom"]
                if "secretKeyRef" in src or "configMapKeyRef" in src:
                    ref = src.get("secretKeyRef") or src.get("configMapKeyRef")
                    store = self.secrets if "secretKeyRef" in src else self.configmaps
                    data = store.get(ref["name"])
                    ensure(data is not None or ref.get("optional"), f"{ctr_name}: no object {ref['name']}")
                    if data is None or ref["key"] not in data:
                        ensure(ref.get("optional"), f"{ctr_name}: {ref['name']} has no key {ref['key']}")
                        continue
                    val = data[ref["key"]]
                elif "fieldRef" in src:
                    path = src["fieldRef"]["fieldPath"]
                    val = {"metadata.name": ctr_name, "metadata.namespace": "hub"}.get(path)
                    ensure(val is not None, f"{ctr_name}: unsupported fieldRef {path}")
                else:
                    raise CheckFailed(f"{ctr_name}: unsupported valueFrom {src}")
            else:
                val = ""
            out += ["--env", f"{e['name']}={val}"]
        return out

    def volumes(self, pod, container, ctr_name):
        by_name = {v["name"]: v for v in pod.get("volumes") or []}
        out = []
        for m in container.get("volumeMounts") or []:
            v = by_name.get(m["name"])
            ensure(v is not None, f"{ctr_name}: mount of an undeclared volume {m['name']}")
            if "configMap" in v or "secret" in v:
                src = v.get("configMap") or v.get("secret")
                name = src.get("name") or src.get("secretName")
                data = (self.configmaps if "configMap" in v else self.secrets).get(name)
                ensure(data is not None, f"{ctr_name}: volume {m['name']} names missing {name}")
                items = src.get("items") or [{"key": k, "path": k} for k in data]
                d = self.workdir / "volumes" / ctr_name / m["name"]
                d.mkdir(parents=True, exist_ok=True)
                for it in items:
                    f = d / it["path"]
                    f.parent.mkdir(parents=True, exist_ok=True)
                    f.write_text(data[it["key"]])
                    f.chmod(0o644)
                for p in [d, *d.parents][: len(d.relative_to(self.workdir).parts)]:
                    p.chmod(0o755)
                if m.get("subPath"):
                    out += ["-v", f"{d / m['subPath']}:{m['mountPath']}:ro"]
                else:
                    out += ["-v", f"{d}:{m['mountPath']}:ro"]
            elif "emptyDir" in v:
                out += ["--tmpfs", f"{m['mountPath']}:rw,nosuid,nodev,mode=1777"]
            else:
                raise CheckFailed(f"{ctr_name}: unsupported volume {v}")
        return out

    def security(self, pod, container, ctr_name):
        psc = pod.get("securityContext") or {}
        csc = container.get("securityContext") or {}
        out = []
        uid = csc.get("runAsUser", psc.get("runAsUser"))
        gid = csc.get("runAsGroup", psc.get("runAsGroup"))
        if uid is not None:
            out += ["--user", f"{uid}:{gid}" if gid is not None else str(uid)]
        if psc.get("fsGroup") is not None:
            out += ["--group-add", str(psc["fsGroup"])]
        non_root = csc.get("runAsNonRoot", psc.get("runAsNonRoot"))
        ensure(non_root and uid not in (None, 0), f"{ctr_name}: must run as a non-root uid")
        ensure(csc.get("readOnlyRootFilesystem") is True, f"{ctr_name}: root filesystem not read-only")
        out += ["--read-only", "--read-only-tmpfs=false"]
        ensure(csc.get("allowPrivilegeEscalation") is False, f"{ctr_name}: privilege escalation allowed")
        out += ["--security-opt", "no-new-privileges"]
        caps = csc.get("capabilities") or {}
        ensure([c.upper() for c in caps.get("drop") or []] == ["ALL"], f"{ctr_name}: capabilities not dropped")
        out += ["--cap-drop", "all"]
        for c in caps.get("add") or []:
            out += ["--cap-add", c]
        return out

    def podman_args(self, pod, container, ctr_name):
        args = ["--name", ctr_name, "--network", self.network, "--pull", "never"]
        args += self.security(pod, container, ctr_name)
        args += self.env(container, ctr_name)
        args += self.volumes(pod, container, ctr_name)
        mem = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if mem:
            args += ["--memory", mem.replace("Mi", "m").replace("Gi", "g")]
        if container.get("command"):
            args += ["--entrypoint", json.dumps(container["command"])]
        return args

    def run_jobs(self):
        jobs = self.of_kind("Job")
        ensure(jobs, "the chart renders no migration Job")
        jobs.sort(key=lambda j: (int((j["metadata"].get("annotations") or {})
                                     .get("helm.sh/hook-weight", "0")), j["metadata"]["name"]))
        for job in jobs:
            pod = job["spec"]["template"]["spec"]
            for c in pod["containers"]:
                name = f"{job['metadata']['name']}-{c['name']}"
                log(f"job {name}: {' '.join(c.get('command') or [])} {' '.join(c.get('args') or [])}")
                self.containers.append(name)
                p = podman("run", *self.podman_args(pod, c, name), c["image"], *(c.get("args") or []),
                           check=False)
                if p.returncode != 0:
                    raise CheckFailed(f"job {name} exited {p.returncode}:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")

    def services_for(self, labels):
        names = []
        for s in self.of_kind("Service"):
            sel = s["spec"].get("selector") or {}
            if sel and all(labels.get(k) == v for k, v in sel.items()):
                names.append(s)
        return names

    def start_deployments(self):
        started = {}
        for dep in self.of_kind("Deployment"):
            tmpl = dep["spec"]["template"]
            pod, labels = tmpl["spec"], tmpl["metadata"]["labels"]
            services = self.services_for(labels)
            ensure(services, f"no Service selects Deployment {dep['metadata']['name']}")
            c = pod["containers"][0]
            ports = {p["name"]: p["containerPort"] for p in c.get("ports") or []}
            for s in services:
                for sp in s["spec"]["ports"]:
                    target = sp.get("targetPort", sp["port"])
                    target = ports.get(target, target)
                    # Service name:port reaches the container only when they agree.
                    ensure(target == sp["port"], f"Service {s['metadata']['name']} maps {sp['port']} to {target}")
            name = dep["metadata"]["name"]
            args = self.podman_args(pod, c, name)
            for s in services:
                args += ["--network-alias", s["metadata"]["name"]]
            for port in ports.values():
                args += ["-p", f"127.0.0.1::{port}"]
            self.containers.append(name)
            podman("run", "-d", *args, c["image"], *(c.get("args") or []))
            probe = c.get("readinessProbe", {}).get("httpGet", {})
            probe_port = ports.get(probe.get("port"), probe.get("port"))
            host_port = podman("port", name, f"{probe_port}/tcp").stdout.strip().rsplit(":", 1)[1]
            metrics_port = podman("port", name, f"{ports['metrics']}/tcp").stdout.strip().rsplit(":", 1)[1]
            started[name] = {"port": int(host_port), "ready": probe.get("path"),
                             "kind": labels.get("hub.example.com/kind"), "metrics": int(metrics_port),
                             "scrape": tmpl["metadata"].get("annotations") or {}}
            log(f"deployment {name} -> 127.0.0.1:{host_port}")
        return started

    def logs(self, name, lines=40):
        p = podman("logs", "--tail", str(lines), name, check=False)
        return (p.stdout + p.stderr).strip()


# --- HTTP through the gateways -----------------------------------------------------

def call(method, url, token=None, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("content-type", "application/json")
    if token:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def eventually(what, f, timeout=90, every=0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = f()
        if last:
            return last
        time.sleep(every)
    raise CheckFailed(f"timed out waiting for {what}")


def wait_ready(started, cluster):
    for name, s in started.items():
        def ready(s=s):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{s['port']}{s['ready']}", timeout=3) as r:
                    return r.status == 200
            except (OSError, urllib.error.HTTPError):
                state = podman("inspect", "--format", "{{.State.Status}}", name, check=False).stdout.strip()
                if state != "running":
                    raise CheckFailed(f"{name} is {state}:\n{cluster.logs(name)}")
                return False
        try:
            eventually(f"{name} {s['ready']}", ready, timeout=120)
        except CheckFailed as e:
            raise CheckFailed(f"{e}\n{cluster.logs(name)}") from None
        log(f"{name}: ready")


def scrape_all(started):
    """Every container's metrics port, where its scrape annotations say: a
    Prometheus text exposition `promtool check metrics` accepts, with the
    requests the flow made counted by route template."""
    for name, s in started.items():
        path = s["scrape"].get("prometheus.io/path", "/metrics")
        ensure(s["scrape"].get("prometheus.io/scrape") == "true", f"{name}: no prometheus.io/scrape annotation")
        with urllib.request.urlopen(f"http://127.0.0.1:{s['metrics']}{path}", timeout=10) as r:
            ensure(r.status == 200, f"{name}: {path} answered {r.status}")
            text = r.read().decode()
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        ensure(p.returncode == 0, f"{name}: promtool check metrics: {p.stdout}{p.stderr}")
        counted = [l for l in text.splitlines() if l.startswith("hub_http_requests_total{")]
        if s["kind"] == "gateway" or name.endswith(("identity", "org-billing", "server-product")):
            ensure(counted, f"{name}: no request counted on {path}")
        ensure(not re.search(r'route="[^"]*[0-9a-f]{8}-[0-9a-f]{4}-', text), f"{name}: an id in a route label")
    log(f"/metrics of all {len(started)} containers: promtool-clean, requests counted by route template")


def flow(started, sink_dir, hooks, hook_url):
    core = next(f"http://127.0.0.1:{s['port']}" for n, s in started.items() if n.endswith("gateway-core"))
    product = next(f"http://127.0.0.1:{s['port']}" for n, s in started.items() if n.endswith("gateway-product"))
    email = f"owner-{secrets.token_hex(4)}@check.example.com"

    status, body = call("POST", f"{core}/v1/auth/request-link", body={"email": email})
    ensure(status == 200, f"request-link: {status} {body}")
    ensure("dev_token" not in (body or {}), "production echoed the sign-in token")

    def mail():
        for f in sorted(pathlib.Path(sink_dir).glob("*.json")):
            m = json.loads(f.read_text())
            if email in m["rcpt_tos"]:
                return m
        return None

    m = eventually("the sign-in mail", mail)
    ensure(m["tls"] and m["authenticated"], f"the mail went without STARTTLS or AUTH: {m}")
    link = re.search(r"https://console\.check\.example\.com/sign-in\?token=([A-Za-z0-9_\-]+)", m["text"] or "")
    ensure(link, f"no sign-in link in the mail: {m['text']!r}")
    status, body = call("POST", f"{core}/v1/auth/verify", body={"token": link[1]})
    ensure(status == 200 and body.get("session_token"), f"verify: {status} {body}")
    token = body["session_token"]
    log(f"signed in by mail as {email}")

    orgs = {}
    for country in ("TR", "DE"):
        status, body = call("POST", f"{core}/v1/organizations", token,
                            {"name": f"Check {country}", "legal_type": "corporate", "country": country})
        ensure(status == 201, f"create a {country} organization: {status} {body}")
        orgs[country] = body["id"]
    log(f"organizations created: {orgs}")

    status, skus = call("GET", f"{product}/v1/skus")
    ensure(status == 200 and any(s.get("id") == "vps-small" for s in skus), f"catalog: {status} {skus}")

    org = orgs["TR"]
    status, ep = call("POST", f"{product}/v1/webhooks", token, {"org_id": org, "url": hook_url})
    ensure(status == 201 and ep.get("secret"), f"webhook endpoint: {status} {ep}")

    status, server = call("POST", f"{product}/v1/servers", token,
                          {"org_id": org, "sku_id": "vps-small", "hostname": "check-01"})
    ensure(status == 201, f"order: {status} {server}")
    sid = server["id"]

    def active():
        st, s = call("GET", f"{product}/v1/servers/{sid}", token)
        ensure(st == 200, f"server: {st} {s}")
        ensure(s["status"] != "failed", f"the server failed: {s}")
        return s if s["status"] == "active" else None

    eventually("the server to become active", active)
    log(f"server {sid} active")

    def delivered():
        kinds = {}
        for headers, raw in hooks.deliveries():
            event = json.loads(raw)
            verify_standard_webhook(ep["secret"], headers, raw)
            if sid in raw.decode():
                kinds[event.get("type")] = event
        return kinds if {"server.created", "server.active"} <= set(kinds) else None

    kinds = eventually("the server's signed webhooks over https", delivered)
    log(f"webhooks arrived over https, signatures valid: {sorted(kinds)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helm", required=True)
    ap.add_argument("--image", required=True, help="repository:tag of the image to run")
    a = ap.parse_args()
    repo, tag = a.image.rsplit(":", 1)

    # A test run as tests-e2e/src/runs.rs defines one: its database and streams
    # carry the run id, and the run's advisory lock, held for as long as this
    # process lives, keeps a concurrent `make test`'s cleaner off them; after
    # the check (however it ends) the next cleaner drops what is left.
    run_id = secrets.token_hex(4)
    stack_tag = run_id + secrets.token_hex(6)
    run_lock = hold_run_lock(run_id)
    network = f"hubcheck-{run_id}"
    db = f"hubtest_{run_id}_{secrets.token_hex(16)}"
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="hub-deploy-check-"))
    workdir.chmod(0o755)
    cleanup = []
    cluster = None
    ok = False
    try:
        podman("network", "create", network)
        cleanup.append(lambda: podman("network", "rm", "-f", network, check=False))
        info = json.loads(podman("network", "inspect", network).stdout)[0]
        gw = info["subnets"][0]["gateway"]
        # The bridge (and with it the host's address on it) exists while a
        # container is attached: one that only sleeps holds it for the run.
        anchor = f"hubcheck-{run_id}-anchor"
        podman("run", "-d", "--name", anchor, "--network", network, "--pull", "never",
               "--entrypoint", "sleep", a.image, "infinity")
        cleanup.append(lambda: podman("rm", "-f", "-t", "0", anchor, check=False))

        ca = trustme.CA()
        leaf = ca.issue_cert(HOST_NAME)
        ca_pem = ca.cert_pem.bytes().decode()
        leaf.private_key_and_cert_chain_pem.write_to_path(str(workdir / "leaf.pem"))

        pg = Relay(gw, (PGHOST, PGPORT))
        nats = Relay(gw, (NATS_HOST, NATS_PORT))
        cleanup += [pg.close, nats.close]
        psql(f'CREATE DATABASE "{db}"')
        cleanup.append(lambda: psql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))

        sink_dir = workdir / "mail"
        smtp_user, smtp_pass = "hub", secrets.token_urlsafe(16)
        sink = subprocess.Popen(
            # `--x=value`: token_urlsafe may begin with "-", which argparse takes for an option.
            [sys.executable, str(ROOT / "tests-e2e/smtp_sink.py"), "--host", gw, "--out", str(sink_dir),
             "--starttls", str(workdir / "smtp-ca"), "--tls-cert", str(workdir / "leaf.pem"),
             "--tls-key", str(workdir / "leaf.pem"), f"--user={smtp_user}", f"--password={smtp_pass}"],
            stdout=subprocess.PIPE, text=True)
        cleanup.append(sink.kill)
        ready = sink.stdout.readline().split()  # "PORT n", or nothing if it exited
        if len(ready) < 2:
            sys.exit(f"deploy-check: the SMTP sink did not start (exit {sink.wait()}); its error is above")
        smtp_port = int(ready[1])
        hooks = HookReceiver(gw, str(workdir / "leaf.pem"), str(workdir / "leaf.pem"))
        cleanup.append(hooks.close)

        def db_url(role, password):
            auth = f"{role}:{password}" if password else role
            return f"postgres://{auth}@{HOST_NAME}:{pg.port}/{db}?sslmode=require"

        base_values = yaml.safe_load((CHART / "values.yaml").read_text())
        names = {"subject_prefix": f"t{stack_tag}.", "stream_suffix": f"_t{stack_tag}"}
        run_values = {
            "image": {"repository": repo},
            "tls": {"extraCA": ca_pem},
            "services": {
                svc: {"env": {f"{v['envPrefix']}__NATS__SUBJECT_PREFIX": names["subject_prefix"],
                              f"{v['envPrefix']}__NATS__STREAM_SUFFIX": names["stream_suffix"]}}
                for svc, v in base_values["services"].items()
                if v.get("kind") != "console"  # no NATS
            },
        }
        values_file = workdir / "run-values.yaml"
        values_file.write_text(yaml.safe_dump(run_values))
        keys = secret_keys(render(a.helm, [CHECK_VALUES, values_file], tag))
        run_values["secrets"] = {"values": make_secrets(
            keys, db_url, f"nats://{HOST_NAME}:{nats.port}",
            f"smtp://{smtp_user}:{smtp_pass}@{HOST_NAME}:{smtp_port}?tls=required")}
        values_file.write_text(yaml.safe_dump(run_values))
        docs = render(a.helm, [CHECK_VALUES, values_file], tag)
        log(f"rendered {len(docs)} objects: " + ", ".join(
            f"{k} {sum(d['kind'] == k for d in docs)}" for k in sorted({d['kind'] for d in docs})))

        cluster = Cluster(docs, network, workdir)
        cleanup.append(lambda: [podman("rm", "-f", "-t", "5", c, check=False) for c in cluster.containers])
        cluster.run_jobs()
        started = cluster.start_deployments()
        wait_ready(started, cluster)

        for name in started:
            p = podman("healthcheck", "run", name, check=False)
            ensure(p.returncode == 0, f"{name}: the image's HEALTHCHECK failed: {p.stdout}{p.stderr}")
            user = podman("exec", name, "id", "-u").stdout.strip()
            ensure(user != "0", f"{name} runs as root")
            touch = podman("exec", name, "sh", "-c", "echo x > /usr/local/bin/x", check=False)
            ensure(touch.returncode != 0, f"{name}: the root filesystem is writable")
        log(f"HEALTHCHECK healthy, non-root and read-only in all {len(started)} containers")

        rows = psql("SELECT count(*), count(*) FILTER (WHERE s.ssl) FROM pg_stat_activity a "
                    f"JOIN pg_stat_ssl s USING (pid) WHERE a.datname = '{db}'")
        total, encrypted = map(int, rows.split("|"))
        ensure(total > 0 and total == encrypted, f"pg_stat_ssl: {encrypted} of {total} connections encrypted")
        log(f"pg_stat_ssl: all {total} service connections encrypted")

        flow(started, sink_dir, hooks, f"https://{HOST_NAME}:{hooks.port}/hook")
        scrape_all(started)
        ok = True
        log("OK")
    except CheckFailed as e:
        log(f"FAILED: {e}")
        if cluster:
            for name in cluster.containers:
                if podman("container", "exists", name, check=False).returncode == 0:
                    print(f"--- {name}\n{cluster.logs(name, 15)}", file=sys.stderr)
    finally:
        for f in reversed(cleanup):
            try:
                f()
            except Exception as e:  # noqa: BLE001 - teardown goes on
                log(f"cleanup: {e}")
        shutil.rmtree(workdir, ignore_errors=True)
        run_lock.kill()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
