#!/usr/bin/env python3
"""Record the MutatingAdmissionPolicy conformance cases against a real, in-tree kube-apiserver.

For every cases/NNN-*.yaml this starts from a clean slate inside one shared apiserver, installs the
case's policies, waits until they are provably in effect, sends the request and records what the
apiserver stored (or the exact denial) as `expect:` in the case file.  --check compares instead of
writing.  See README.md for the case format, the probe and the normalization.

Python 3.11, stdlib + PyYAML (`python3 -m venv .venv && .venv/bin/pip install pyyaml`), openssl,
and KUBEBUILDER_ASSETS naming a directory with kube-apiserver and etcd (v1.36.2 recorded the cases).
"""

import argparse
import copy
import glob
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("PyYAML is needed: python3 -m venv .venv && .venv/bin/pip install pyyaml, "
             "then run with .venv/bin/python")

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_DIR = os.path.join(HERE, "cases")

ADMIN_USER = "map-admin"
PROBE_NS = "map-probe"                      # shared namespace for the sentinel probe request
PROBE_NAME = "map-sentinel-probe"           # name of the ConfigMap the probe dry-run creates
KEEPER_RESOURCE_NAME = "map-keeper-never-created"
POLL = 0.1                                  # poll interval (seconds) for every wait
PROBE_TIMEOUT = 60.0
CRD_SCHEMA_MSG = "There can be a delay between when CustomResourceDefinitions are created"

# --------------------------------------------------------------------------------------------
# small helpers


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def sh(*args, cwd=None):
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class ApiError(Exception):
    def __init__(self, code, body):
        self.code = code
        self.body = body
        msg = body.get("message") if isinstance(body, dict) else str(body)
        super().__init__(f"HTTP {code}: {msg}")

    @property
    def message(self):
        return self.body.get("message") if isinstance(self.body, dict) else str(self.body)


# --------------------------------------------------------------------------------------------
# the cluster: etcd + kube-apiserver in a temp dir


class Cluster:
    def __init__(self, assets, keep=False):
        self.assets = assets
        self.keep = keep
        self.dir = tempfile.mkdtemp(prefix="map-intree-")
        self.etcd = None
        self.kas = None
        self.token = secrets.token_hex(16)
        self.port = None
        self.conn = None
        self._disc = {}

    # ---- PKI
    def _pki(self):
        d = self.dir
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=map-test-ca",
           "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
        with open(os.path.join(d, "san.cnf"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc,IP:10.96.0.1\n")
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver",
           "-keyout", "apiserver.key", "-out", "apiserver.csr", cwd=d)
        sh("openssl", "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
           "-CAcreateserial", "-days", "2", "-extfile", "san.cnf", "-out", "apiserver.crt", cwd=d)
        sh("openssl", "genrsa", "-out", "sa.key", "2048", cwd=d)
        sh("openssl", "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
        with open(os.path.join(d, "tokens.csv"), "w") as f:
            f.write(f'{self.token},{ADMIN_USER},uid-map-admin,"system:masters"\n')

    def start(self):
        self._pki()
        d = self.dir
        ep, epp, self.port = free_port(), free_port(), free_port()
        self.etcd_log = open(os.path.join(d, "etcd.log"), "w")
        self.etcd = subprocess.Popen([
            os.path.join(self.assets, "etcd"), "--name", "t", "--data-dir", os.path.join(d, "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{ep}", "--advertise-client-urls", f"http://127.0.0.1:{ep}",
            "--listen-peer-urls", f"http://127.0.0.1:{epp}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{epp}",
            "--initial-cluster", f"t=http://127.0.0.1:{epp}", "--unsafe-no-fsync",
        ], stdout=self.etcd_log, stderr=subprocess.STDOUT, start_new_session=True)
        self.kas_log = open(os.path.join(d, "kube-apiserver.log"), "w")
        self.kas = subprocess.Popen([
            os.path.join(self.assets, "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{ep}", "--bind-address=127.0.0.1", f"--secure-port={self.port}",
            "--advertise-address=127.0.0.1",
            f"--tls-cert-file={d}/apiserver.crt", f"--tls-private-key-file={d}/apiserver.key",
            f"--client-ca-file={d}/ca.crt", f"--token-auth-file={d}/tokens.csv", "--authorization-mode=RBAC",
            f"--service-account-key-file={d}/sa.pub", f"--service-account-signing-key-file={d}/sa.key",
            "--service-account-issuer=https://kubernetes.default.svc", "--service-cluster-ip-range=10.96.0.0/24",
            "--endpoint-reconciler-type=none",
            "--enable-admission-plugins=NamespaceLifecycle,MutatingAdmissionPolicy,MutatingAdmissionWebhook,"
            "ValidatingAdmissionWebhook",
            # the ServiceAccount plugin adds a token volume with a random name to every pod
            "--disable-admission-plugins=ServiceAccount",
            f"--cert-dir={d}/kas-certs",
        ], stdout=self.kas_log, stderr=subprocess.STDOUT, start_new_session=True)
        self.ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        t0 = time.time()
        while True:
            if self.etcd.poll() is not None:
                raise RuntimeError(f"etcd exited early, see {d}/etcd.log")
            if self.kas.poll() is not None:
                raise RuntimeError(f"kube-apiserver exited early, see {d}/kube-apiserver.log")
            try:
                code, body = self.raw("GET", "/readyz")
                if code == 200 and body.strip() == b"ok":
                    break
            except (OSError, http.client.HTTPException):
                self.conn = None
            if time.time() - t0 > 180:
                raise RuntimeError("kube-apiserver not ready after 180 s")
            time.sleep(0.25)
        self.ready_after = time.time() - t0
        self.write_kubeconfig()

    def write_kubeconfig(self):
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: t
  cluster: {{server: "https://127.0.0.1:{self.port}", certificate-authority: "{self.dir}/ca.crt"}}
users:
- name: admin
  user: {{token: "{self.token}"}}
contexts:
- name: t
  context: {{cluster: t, user: admin}}
current-context: t
""")

    def stop(self):
        # kube-apiserver first, then etcd (with etcd gone first the apiserver can hang in shutdown)
        for p in (self.kas, self.etcd):
            if p is None or p.poll() is not None:
                continue
            try:
                p.terminate()
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.kas = self.etcd = None
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- HTTP
    def raw(self, method, path, body=None, ctype="application/json"):
        for attempt in range(3):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=60)
            headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
            data = None
            if body is not None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                headers["Content-Type"] = ctype
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
                time.sleep(POLL)

    def req(self, method, path, body=None, query=None, ok_missing=False):
        if query:
            path += "?" + urllib.parse.urlencode(query, doseq=True)
        code, raw = self.raw(method, path, body)
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = raw.decode(errors="replace")
        if code == 404 and ok_missing:
            return None
        if code >= 300:
            raise ApiError(code, data)
        return data

    # ---- discovery: (apiVersion, kind) -> (plural, namespaced)
    def resource_for(self, api_version, kind):
        for refresh in (False, True):
            if refresh or api_version not in self._disc:
                base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
                try:
                    lst = self.req("GET", base)
                except ApiError:
                    lst = {"resources": []}
                self._disc[api_version] = {r["kind"]: (r["name"], r["namespaced"])
                                           for r in lst.get("resources", []) if "/" not in r["name"]}
            if kind in self._disc[api_version]:
                return self._disc[api_version][kind]
        raise KeyError(f"no resource for {api_version} {kind}")

    def path_for(self, obj, namespace=None, name=True):
        av, kind = obj["apiVersion"], obj["kind"]
        plural, namespaced = self.resource_for(av, kind)
        base = "/api/v1" if av == "v1" else f"/apis/{av}"
        ns = obj.get("metadata", {}).get("namespace") or namespace
        p = base + (f"/namespaces/{ns}" if namespaced else "") + f"/{plural}"
        if name:
            p += "/" + obj["metadata"]["name"]
        return p, namespaced

    def create(self, obj, namespace=None, dry_run=False):
        p, _ = self.path_for(obj, namespace, name=False)
        q = {"fieldManager": "map-cases"}
        if dry_run:
            q["dryRun"] = "All"
        return self.req("POST", p, obj, q)

    def replace(self, obj, namespace=None, dry_run=False, subresource=None):
        p, _ = self.path_for(obj, namespace)
        if subresource:
            p += "/" + subresource
        q = {"fieldManager": "map-cases"}
        if dry_run:
            q["dryRun"] = "All"
        return self.req("PUT", p, obj, q)

    def delete(self, obj, namespace=None, dry_run=False, ok_missing=True):
        p, _ = self.path_for(obj, namespace)
        q = {"dryRun": "All"} if dry_run else None
        return self.req("DELETE", p, None, q, ok_missing=ok_missing)

    def get(self, obj, namespace=None):
        p, _ = self.path_for(obj, namespace)
        return self.req("GET", p, ok_missing=True)


# --------------------------------------------------------------------------------------------
# cases


def load_cases(selected):
    files = sorted(glob.glob(os.path.join(CASES_DIR, "*.yaml")))
    out = []
    for f in files:
        with open(f) as fh:
            c = yaml.safe_load(fh)
        base = os.path.basename(f)[:-5]
        if selected and not any(s in (c.get("name"), base) or base.startswith(s + "-") for s in selected):
            continue
        c["_file"] = f
        out.append(c)
    return out


def write_expect(path, expect):
    """Replace the top-level `expect:` block of the case file, leaving every other byte as it was."""
    with open(path) as f:
        lines = f.read().split("\n")
    start = next((i for i, l in enumerate(lines) if re.match(r"^expect:", l)), None)
    block = yaml.safe_dump({"expect": expect}, sort_keys=False, default_flow_style=False,
                           width=1000, allow_unicode=True).rstrip("\n").split("\n")
    if start is None:
        while lines and lines[-1] == "":
            lines.pop()
        lines += block + [""]
    else:
        end = start + 1
        while end < len(lines) and (lines[end] == "" or lines[end][0] in " #-"):
            end += 1
        # keep the blank/comment lines that belong to the next top-level key
        while end > start + 1 and (lines[end - 1] == "" or lines[end - 1].startswith("#")):
            end -= 1
        lines[start:end] = block
        if end >= len(lines) - 1 and (not lines or lines[-1] != ""):
            lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


RANDOM_META = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")


def normalize(obj, request_obj=None):
    """Drop what the apiserver makes up on every run; see README.md 'Normalization'."""
    o = copy.deepcopy(obj)
    md = o.get("metadata", {})
    for k in RANDOM_META:
        md.pop(k, None)
    if "deletionTimestamp" in md:
        md["deletionTimestamp"] = "<set>"
    if request_obj is not None:
        rmd = request_obj.get("metadata", {})
        if rmd.get("generateName") and not rmd.get("name") and md.get("name", "").startswith(rmd["generateName"]):
            md["name"] = rmd["generateName"] + "<generated>"
    if o.get("kind") == "Service":
        spec = o.get("spec", {})
        if spec.get("clusterIP") not in (None, "None", ""):
            spec["clusterIP"] = "<allocated>"
            spec["clusterIPs"] = ["<allocated>" if ip != "None" else ip for ip in spec.get("clusterIPs", [])]
        for p in spec.get("ports", []) or []:
            if "nodePort" in p:
                p["nodePort"] = "<allocated>"
    return o


def diff(a, b, path=""):
    """Human-readable list of differences between two JSON values."""
    out = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}/{k}: missing in expected, got {json.dumps(b[k])}")
            elif k not in b:
                out.append(f"{path}/{k}: expected {json.dumps(a[k])}, missing in result")
            else:
                out += diff(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}/{i}")
    elif a != b:
        out.append(f"{path or '/'}: expected {json.dumps(a)}, got {json.dumps(b)}")
    return out


class Runner:
    def __init__(self, cluster, verbose=False):
        self.c = cluster
        self.verbose = verbose
        self.keepers = set()
        self.seq = 0

    # ---- one-time set-up
    def bootstrap(self):
        c = self.c
        c.create({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": PROBE_NS, "labels": {"map-cases/probe": "true"}}})
        # kube-apiserver needs a moment after /readyz before every API group is discoverable
        t0 = time.time()
        while True:
            try:
                c.resource_for("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy")
                break
            except KeyError:
                if time.time() - t0 > 60:
                    raise
                time.sleep(POLL)
        self.ensure_keeper({"apiVersion": "v1", "kind": "ConfigMap"})

    def ensure_keeper(self, param_kind):
        """One bound policy per paramKind that lives for the whole run (see README: 'paramKind pitfall')."""
        key = (param_kind.get("apiVersion"), param_kind.get("kind"))
        if key in self.keepers:
            return
        try:
            self.c.resource_for(*key)
        except KeyError:
            return  # a paramKind that does not exist (a case about that): nothing to keep alive
        name = "zz-keeper-" + re.sub(r"[^a-z0-9]+", "-", f"{key[1]}-{key[0]}".lower()).strip("-")
        self.c.create({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "paramKind": dict(param_kind),
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
                    "operations": ["CREATE"], "resourceNames": [KEEPER_RESOURCE_NAME]}]},
                "reinvocationPolicy": "Never",
                "mutations": [{"patchType": "ApplyConfiguration",
                               "applyConfiguration": {"expression": "Object{}"}}],
            }})
        self.c.create({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name}})
        self.keepers.add(key)

    # ---- the policy-in-effect probe
    def sentinel_param(self, ns):
        """Step 1 of the probe: the sentinel's param ConfigMap, created after the case's setup objects
        and before its policies (so the case's policies cannot interfere with its creation)."""
        self.seq += 1
        token = f"{ns}-{self.seq}-{secrets.token_hex(3)}"
        name = f"zz-sentinel-{self.seq}"
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": name, "namespace": ns}, "data": {"token": token}}
        self.c.create(cm)
        return token, name, cm

    def sentinel_policy(self, ns, name):
        """Step 2 of the probe: a policy + binding created after every policy of the case.

        Informer events of one resource arrive in resourceVersion order and the policy snapshot is
        rebuilt from the policy and binding caches as a whole: once the probe request is mutated by
        the sentinel (which needs its param ConfigMap, its policy and its binding), every
        ConfigMap, policy and binding created before them is in the snapshot too, and every one
        deleted before them is gone."""
        pol = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
               "metadata": {"name": name},
               "spec": {
                   "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                   "matchConstraints": {
                       "namespaceSelector": {"matchLabels": {"map-cases/probe": "true"}},
                       "resourceRules": [{
                           "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
                           "operations": ["CREATE"], "resourceNames": [PROBE_NAME]}]},
                   "failurePolicy": "Ignore",
                   "reinvocationPolicy": "Never",
                   "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                       "expression": 'Object{metadata: Object.metadata{labels: {"map-cases/sentinel": params.data.token}}}'}}],
               }}
        bnd = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
               "metadata": {"name": name},
               "spec": {"policyName": name,
                        "paramRef": {"name": name, "namespace": ns, "parameterNotFoundAction": "Allow"}}}
        self.c.create(pol)
        self.c.create(bnd)
        return [pol, bnd]

    def wait_sentinel(self, token, gone=False):
        """Poll the probe (a dry-run CREATE of ConfigMap map-probe/map-sentinel-probe) until the
        sentinel's label carries `token` (gone=False) or no longer does (gone=True)."""
        probe = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": PROBE_NAME, "namespace": PROBE_NS}}
        t0 = time.time()
        last = None
        n = 0
        while time.time() - t0 < PROBE_TIMEOUT:
            n += 1
            try:
                r = self.c.create(probe, dry_run=True)
                last = r.get("metadata", {}).get("labels", {})
                if (last.get("map-cases/sentinel") == token) != gone:
                    return time.time() - t0, n
            except ApiError as e:
                last = e.message
            time.sleep(POLL)
        raise RuntimeError(f"sentinel policy never {'went away' if gone else 'took effect'} (last probe result: {last})")

    # ---- one case
    def submit(self, case, op, obj, ns, dry_run):
        c = self.c
        if op == "CREATE":
            return c.create(obj, ns, dry_run=dry_run)
        if op == "UPDATE":
            return c.replace(obj, ns, dry_run=dry_run, subresource=case["request"].get("subresource"))
        if op == "DELETE":
            r = c.delete(obj, ns, dry_run=dry_run, ok_missing=False)
            if dry_run:
                return {"dryRunDelete": "ok"}
            stored = c.get(obj, ns)
            return stored if stored is not None else {"gone": True}
        raise ValueError(f"unsupported operation {op}")

    def outcome(self, case, op, obj, ns, dry_run):
        """(kind, value): ('object', normalized object) or ('denied', (message, code))."""
        t0 = time.time()
        while True:
            try:
                r = self.submit(case, op, obj, ns, dry_run)
                if isinstance(r, dict) and r.get("gone"):
                    return ("gone", True)
                return ("object", normalize(r, obj))
            except ApiError as e:
                # the MAP type converter reads OpenAPI paths every 5 s: a fresh CRD can be missing
                if CRD_SCHEMA_MSG in (e.message or "") and time.time() - t0 < 30:
                    time.sleep(0.5)
                    continue
                return ("denied", (e.message, e.code))

    def run_case(self, case):
        c = self.c
        req = case["request"]
        ns = req["namespace"]
        op = req["operation"]
        timings = {}
        t0 = time.time()
        created_cluster_scoped = []   # deleted after the case
        setup = case.get("setup") or []
        ns_obj = next((o for o in setup if o.get("kind") == "Namespace" and o["metadata"]["name"] == ns), None)
        if ns_obj is None:
            c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for o in setup:
            o = copy.deepcopy(o)
            _, namespaced = c.path_for(o, ns, name=False)
            if namespaced:
                o.setdefault("metadata", {}).setdefault("namespace", ns)
            c.create(o, ns)
            if not namespaced and not (o["kind"] == "Namespace" and o["metadata"]["name"] == ns):
                created_cluster_scoped.append(o)
            if o["kind"] == "CustomResourceDefinition":
                self.wait_crd(o)
        if not any(o.get("kind") == "ServiceAccount" and o["metadata"]["name"] == "default" for o in setup):
            c.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}})
        obj = copy.deepcopy(req["object"])
        _, namespaced = c.path_for(obj, ns, name=False)
        if namespaced:
            obj.setdefault("metadata", {}).setdefault("namespace", ns)
        if op in ("UPDATE", "DELETE"):
            old = copy.deepcopy(req.get("oldObject") or req["object"])
            if namespaced:
                old.setdefault("metadata", {}).setdefault("namespace", ns)
            c.create(old, ns)
            if not namespaced:
                created_cluster_scoped.append(old)
        timings["setup"] = time.time() - t0

        # policies
        t1 = time.time()
        policies = case.get("policies") or []
        for p in policies:
            if p.get("kind") == "MutatingAdmissionPolicy" and p.get("spec", {}).get("paramKind"):
                self.ensure_keeper(p["spec"]["paramKind"])
        installed = []
        probes = 0
        sentinel = []
        token, sname, scm = self.sentinel_param(ns)
        try:
            for p in policies:
                try:
                    c.create(copy.deepcopy(p))
                except ApiError as e:
                    if e.code in (400, 422):
                        # the policy itself is refused: that is the case's result
                        timings["policies-in-effect"] = 0.0
                        return ({"rejected": e.message, "code": e.code}, [], timings, 0)
                    raise
                installed.append(p)
            sentinel = self.sentinel_policy(ns, sname)
            waited, probes = self.wait_sentinel(token)
            timings["policies-in-effect"] = time.time() - t1

            # two identical server-side dry runs in a row, then the real request
            t2 = time.time()
            prev = self.outcome(case, op, obj, ns, dry_run=True)
            dry = 1
            while True:
                cur = self.outcome(case, op, obj, ns, dry_run=True)
                dry += 1
                if cur == prev:
                    break
                if dry >= 20:
                    raise RuntimeError(f"dry runs never stabilised: {prev} vs {cur}")
                prev = cur
                time.sleep(POLL)
            real = self.outcome(case, op, obj, ns, dry_run=False)
            timings["request"] = time.time() - t2
            notes = []
            if real != cur and op != "DELETE":
                notes.append(f"real request differs from dry run: {diff(self.expect_of(cur), self.expect_of(real))}")
            if real[0] == "object" and not namespaced and op == "CREATE":
                created_cluster_scoped.append(obj)
        finally:
            t3 = time.time()
            # the case's policies first, then the sentinel; once the probe is no longer mutated by
            # the sentinel, the snapshot holds none of them (same ordering argument as above), so
            # nothing of this case can touch the next case's setup objects.
            for p in list(reversed(installed)) + list(reversed(sentinel)):
                try:
                    c.delete(p)
                except ApiError as e:
                    log(f"  cleanup of {p['kind']} {p['metadata']['name']}: {e}")
            if installed and not sentinel:
                # the case stopped before its sentinel (a refused policy): prove the deletions took
                # effect by installing the sentinel now, after them
                sentinel = self.sentinel_policy(ns, sname)
                self.wait_sentinel(token)
                for p in reversed(sentinel):
                    c.delete(p)
            if sentinel:
                self.wait_sentinel(token, gone=True)
            c.delete(scm)
            for o in reversed(created_cluster_scoped):
                try:
                    c.delete(o)
                except ApiError as e:
                    log(f"  cleanup of {o['kind']} {o['metadata'].get('name')}: {e}")
            timings["cleanup"] = time.time() - t3
            timings["total"] = time.time() - t0
        return self.expect_of(real), notes, timings, probes

    @staticmethod
    def expect_of(outcome):
        kind, val = outcome
        if kind == "object":
            return {"object": val}
        if kind == "gone":
            return {"gone": True}
        if kind == "rejected":
            return val
        msg, code = val
        return {"denied": msg, "code": code}

    def wait_crd(self, crd):
        t0 = time.time()
        name = crd["metadata"]["name"]
        while time.time() - t0 < 60:
            cur = self.c.req("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conds = {x["type"]: x["status"] for x in ((cur.get("status") or {}).get("conditions") or [])}
            if conds.get("Established") == "True":
                ok = True
                for v in crd["spec"]["versions"]:
                    if not v.get("served", True):
                        continue
                    try:
                        self.c.resource_for(f"{crd['spec']['group']}/{v['name']}", crd["spec"]["names"]["kind"])
                    except KeyError:
                        ok = False
                if ok:
                    return
            time.sleep(POLL)
        raise RuntimeError(f"CRD {name} not established")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", help="case names or NNN prefixes (default: all)")
    ap.add_argument("--check", action="store_true", help="compare with the recorded expect, do not write")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, kubeconfig)")
    ap.add_argument("--serve", action="store_true", help="start the cluster, print a kubeconfig, wait for Ctrl-C")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if not assets:
        sys.exit("KUBEBUILDER_ASSETS must name a directory with kube-apiserver and etcd")
    cases = [] if args.serve else load_cases(args.cases)
    if not args.serve and not cases:
        sys.exit("no cases selected")

    T0 = time.time()
    cluster = Cluster(assets, keep=args.keep or args.serve)

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    results = []
    try:
        cluster.start()
        log(f"kube-apiserver ready after {cluster.ready_after:.1f}s  (dir {cluster.dir})")
        runner = Runner(cluster, args.verbose)
        runner.bootstrap()
        if args.serve:
            print(f"export KUBECONFIG={cluster.kubeconfig}", flush=True)
            while True:
                time.sleep(3600)
        for case in cases:
            name = case.get("name")
            try:
                got, notes, timings, probes = runner.run_case(case)
            except Exception as e:  # a broken case must not stop the others
                results.append((name, "ERROR", str(e), {}))
                log(f"ERROR  {name}: {e}")
                continue
            for n in notes:
                log(f"  note {name}: {n}")
            if args.verbose:
                log("  " + ", ".join(f"{k} {v:.2f}s" for k, v in timings.items()))
            timings.setdefault("total", 0.0)
            timings.setdefault("policies-in-effect", 0.0)
            if args.check:
                want = case.get("expect")
                d = diff(want, got) if want is not None else ["no recorded expect"]
                status = "PASS" if not d else "FAIL"
                results.append((name, status, d, timings))
                log(f"{status:6} {name}  ({timings['total']:.1f}s)")
                for line in d:
                    log(f"         {line}")
            else:
                write_expect(case["_file"], got)
                kind = next(k for k in ("rejected", "denied", "gone", "object") if k in got)
                results.append((name, "RECORDED", kind, timings))
                log(f"REC    {name}: {kind}  ({timings['total']:.1f}s, in effect after "
                    f"{timings['policies-in-effect']:.1f}s/{probes} probes)")
    except KeyboardInterrupt:
        log("interrupted")
    finally:
        cluster.stop()
    total = time.time() - T0
    if args.serve:
        return
    n = len(results)
    ok = sum(1 for r in results if r[1] in ("PASS", "RECORDED"))
    per = [r[3]["total"] for r in results if r[3]]
    log("")
    log(f"summary: {n} cases, {ok} {'passed' if args.check else 'recorded'}, "
        f"{sum(1 for r in results if r[1] == 'FAIL')} failed, {sum(1 for r in results if r[1] == 'ERROR')} errors; "
        f"{total:.1f}s total (apiserver start {cluster.ready_after if hasattr(cluster, 'ready_after') else 0:.1f}s), "
        f"per case avg {sum(per) / max(len(per), 1):.2f}s max {max(per or [0]):.2f}s")
    phases = ("setup", "policies-in-effect", "request", "cleanup")
    timed = [r[3] for r in results if r[3] and "request" in r[3]]
    if timed:
        log("per case average by phase: " + ", ".join(
            f"{ph} {sum(t.get(ph, 0) for t in timed) / len(timed):.2f}s" for ph in phases))
    for r in results:
        if r[1] in ("FAIL", "ERROR"):
            log(f"  {r[1]}: {r[0]}")
    sys.exit(0 if ok == n else 1)


if __name__ == "__main__":
    main()
