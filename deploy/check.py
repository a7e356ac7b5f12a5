#!/usr/bin/env python3
"""Offline check of deploy/: the systemd units, the Containerfile and the Kubernetes manifests.

They parse (YAML through python3-yaml; systemd units through `systemd-analyze verify` when it is
installed, else a structural check), and they agree with each other and with the binary:
images, ports, volumes, secrets and flags are named consistently. Run by CTest (deploy_check);
by hand:

    deploy/check.py --tessel build/cli/tessel

--self-test also breaks a copy of deploy/ in several ways and checks that each is caught.
Exit status 0 when every check passes; 1 with one line per problem on stderr otherwise.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("deploy/check.py needs python3-yaml (apt-get install python3-yaml; "
             "deploy/install-deps.sh installs it)")

SERVER_IMAGE = "tessel-server"
WORKER_IMAGE = "tessel-worker"


class Checker:
    def __init__(self, root, tessel):
        self.root = root
        self.tessel = tessel
        self.problems = []
        self._help = {}

    def fail(self, where, what):
        self.problems.append(f"{os.path.relpath(where, self.root)}: {what}")

    # --- the binary's flags -------------------------------------------------------------------
    def flags_of(self, command):
        """The flags `tessel COMMAND --help` lists; None without a binary."""
        if not self.tessel:
            return None
        if command not in self._help:
            out = subprocess.run([self.tessel, command, "--help"], capture_output=True,
                                 text=True, timeout=60)
            self._help[command] = set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", out.stdout))
        return self._help[command]

    def check_flags(self, where, args):
        """args: the words after the binary (COMMAND --flag value ...)."""
        if not args:
            self.fail(where, "no tessel command")
            return
        known = self.flags_of(args[0])
        if known is None:
            return
        if not known:
            self.fail(where, f"`tessel {args[0]} --help` lists no flags: not a tessel command?")
            return
        for a in args[1:]:
            flag = a.split("=", 1)[0]
            if flag.startswith("--") and flag not in known:
                self.fail(where, f"tessel {args[0]} has no flag {flag} (see tessel {args[0]} "
                                 f"--help)")

    # --- systemd ------------------------------------------------------------------------------
    @staticmethod
    def parse_unit(text):
        sections, current = {}, None
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("[") and line.endswith("]"):
                current = sections.setdefault(line[1:-1], {})
                continue
            if current is None or "=" not in line:
                raise ValueError(f"line {n}: not `[Section]` or `Key=value`: {raw}")
            k, v = line.split("=", 1)
            current.setdefault(k.strip(), []).append(v.strip())
        return sections

    @staticmethod
    def parse_env(path):
        env = {}
        with open(path) as f:
            for n, raw in enumerate(f, 1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
                if not m:
                    raise ValueError(f"line {n}: not NAME=value: {raw.rstrip()}")
                env[m.group(1)] = m.group(2)
        return env

    def check_systemd(self):
        d = os.path.join(self.root, "systemd")
        units = sorted(f for f in os.listdir(d) if f.endswith(".service"))
        for want in ("tessel-serve.service", "tessel-worker.service"):
            if want not in units:
                self.fail(d, f"missing {want}")
        verify = shutil.which("systemd-analyze")
        for u in units:
            path = os.path.join(d, u)
            try:
                sections = self.parse_unit(open(path).read())
            except ValueError as e:
                self.fail(path, str(e))
                continue
            svc = sections.get("Service", {})
            for s in ("Unit", "Service", "Install"):
                if s not in sections:
                    self.fail(path, f"no [{s}] section")
            for key in ("ExecStart", "Restart", "EnvironmentFile", "NoNewPrivileges",
                        "ProtectSystem", "ProtectHome", "PrivateTmp", "DynamicUser"):
                if key not in svc:
                    self.fail(path, f"[Service] has no {key}=")
            if svc.get("Restart", [""])[0] not in ("always", "on-failure"):
                self.fail(path, "Restart= should be always or on-failure")
            env = {}
            for ef in svc.get("EnvironmentFile", []):
                local = os.path.join(d, os.path.basename(ef.lstrip("-")).replace("/", ""))
                if not os.path.exists(local):
                    self.fail(path, f"EnvironmentFile={ef}: no example {os.path.relpath(local, self.root)}")
                    continue
                try:
                    env.update(self.parse_env(local))
                except ValueError as e:
                    self.fail(local, str(e))
            for exec_start in svc.get("ExecStart", []):
                words = exec_start.split()
                for var in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", exec_start):
                    if var not in env:
                        self.fail(path, f"ExecStart uses ${var}, which its EnvironmentFile "
                                        f"example does not set")
                if not words or not words[0].endswith("/tessel"):
                    self.fail(path, "ExecStart does not run tessel")
                    continue
                expanded = []
                for w in words[1:]:
                    m = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", w)
                    if m and m.group(1) in env:
                        expanded.extend(env[m.group(1)].split())
                    else:
                        expanded.append(w)
                self.check_flags(path, expanded)
            if verify:
                self.systemd_verify(path, svc, d)

    def systemd_verify(self, path, svc, d):
        """systemd-analyze verify on a copy whose binary and environment file exist here."""
        tmp = tempfile.mkdtemp(prefix="tessel_units_")
        try:
            text = open(path).read()
            binary = self.tessel or "/bin/true"
            text = text.replace("/usr/local/bin/tessel", os.path.abspath(binary))
            for ef in svc.get("EnvironmentFile", []):
                text = text.replace(ef, os.path.join(d, os.path.basename(ef)))
            copy = os.path.join(tmp, os.path.basename(path))
            with open(copy, "w") as f:
                f.write(text)
            r = subprocess.run(["systemd-analyze", "verify", copy], capture_output=True,
                               text=True, timeout=120)
            for line in (r.stdout + r.stderr).splitlines():
                if os.path.basename(path) in line or r.returncode != 0:
                    self.fail(path, f"systemd-analyze verify: {line}")
        finally:
            shutil.rmtree(tmp)

    # --- Kubernetes ---------------------------------------------------------------------------
    def load_manifests(self):
        d = os.path.join(self.root, "kubernetes")
        docs = []
        for f in sorted(os.listdir(d)):
            if not f.endswith((".yaml", ".yml")):
                continue
            path = os.path.join(d, f)
            try:
                for doc in yaml.safe_load_all(open(path)):
                    if doc is None:
                        continue
                    if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
                        self.fail(path, "a document without kind and apiVersion")
                        continue
                    docs.append((path, doc))
            except yaml.YAMLError as e:
                self.fail(path, f"not valid YAML: {e}")
        return docs

    def check_kubernetes(self, images):
        docs = self.load_manifests()
        by_kind = {}
        for path, doc in docs:
            by_kind.setdefault(doc["kind"], []).append((path, doc))
        namespaces = {doc["metadata"]["name"] for _, doc in by_kind.get("Namespace", [])}
        for path, doc in docs:
            ns = doc.get("metadata", {}).get("namespace")
            if doc["kind"] != "Namespace" and ns not in namespaces:
                self.fail(path, f"{doc['kind']} {doc['metadata'].get('name')}: namespace {ns} "
                                f"is not one of the manifests' Namespaces {sorted(namespaces)}")
        secrets = {doc["metadata"]["name"]: set((doc.get("stringData") or {}).keys()) |
                   set((doc.get("data") or {}).keys())
                   for _, doc in by_kind.get("Secret", [])}
        services = {doc["metadata"]["name"]: (path, doc) for path, doc in by_kind.get("Service", [])}

        sts = by_kind.get("StatefulSet", [])
        ds = by_kind.get("DaemonSet", [])
        if len(sts) != 1:
            self.fail(self.root, f"want one StatefulSet (the server), found {len(sts)}")
        if len(ds) != 1:
            self.fail(self.root, f"want one DaemonSet (the workers), found {len(ds)}")
        grpc_port = None
        server_service = None
        for path, doc in sts:
            spec = doc["spec"]
            if spec.get("replicas") != 1:
                self.fail(path, "the server StatefulSet must have replicas: 1 (one server per log)")
            claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
            if not claims:
                self.fail(path, "no volumeClaimTemplates: the tuning log needs a PersistentVolumeClaim")
            svc_name = spec.get("serviceName")
            if svc_name not in services:
                self.fail(path, f"serviceName {svc_name} is not a Service of the manifests")
            server_service = svc_name
            c = self.check_pod(path, spec["template"], secrets, claims, images, SERVER_IMAGE)
            if c is None:
                continue
            args = c.get("args", [])
            self.check_flags(path, args)
            ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
            for flag, pname in (("--listen", "grpc"), ("--http", "http")):
                v = arg_value(args, flag)
                if v is None:
                    self.fail(path, f"the server is not given {flag}")
                elif pname not in ports:
                    self.fail(path, f"no container port named {pname} for {flag} {v}")
                elif int(v.rsplit(":", 1)[1]) != ports[pname]:
                    self.fail(path, f"{flag} {v} but container port {pname} is {ports[pname]}")
            grpc_port = ports.get("grpc")
            db = arg_value(args, "--db")
            mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
            if db is None or not any(db.startswith(mounts[n].rstrip("/") + "/")
                                     for n in claims if n in mounts):
                self.fail(path, f"--db {db} is not on the PersistentVolumeClaim's mount")
            # The Service that fronts it routes to its named ports and selects its pods.
            if svc_name in services:
                spath, sdoc = services[svc_name]
                labels = spec["template"]["metadata"].get("labels", {})
                for k, v in sdoc["spec"].get("selector", {}).items():
                    if labels.get(k) != v:
                        self.fail(spath, f"selector {k}={v} does not select the server's pods")
                for p in sdoc["spec"].get("ports", []):
                    t = p.get("targetPort")
                    if isinstance(t, str) and t not in ports:
                        self.fail(spath, f"targetPort {t} is not a port of the server container")
                    if p.get("name") == "grpc" and p.get("port") != ports.get("grpc"):
                        grpc_port = p.get("port")
                svc_grpc = [p for p in sdoc["spec"].get("ports", []) if p.get("name") == "grpc"]
                if not svc_grpc:
                    self.fail(spath, "no port named grpc")
                else:
                    grpc_port = svc_grpc[0]["port"]
        for path, doc in ds:
            spec = doc["spec"]
            c = self.check_pod(path, spec["template"], secrets, set(), images, WORKER_IMAGE)
            if c is None:
                continue
            args = c.get("args", [])
            self.check_flags(path, args)
            res = c.get("resources", {})
            if "nvidia.com/gpu" not in (res.get("limits") or {}):
                self.fail(path, "the worker does not request nvidia.com/gpu in resources.limits")
            server = arg_value(args, "--server")
            ns = doc["metadata"].get("namespace")
            if server is None:
                self.fail(path, "the worker is not given --server")
            elif server_service:
                host, _, port = server.rpartition(":")
                names = {server_service, f"{server_service}.{ns}", f"{server_service}.{ns}.svc",
                         f"{server_service}.{ns}.svc.cluster.local"}
                if host not in names:
                    self.fail(path, f"--server {server}: not the server's Service "
                                    f"{server_service} in namespace {ns}")
                if grpc_port is not None and port != str(grpc_port):
                    self.fail(path, f"--server {server}: the Service's grpc port is {grpc_port}")
            env = {e["name"] for e in c.get("env", [])}
            if "TESSEL_TOKEN" not in env:
                self.fail(path, "the worker has no TESSEL_TOKEN (a worker token from a Secret)")

    def check_pod(self, path, template, secrets, claims, images, want_image):
        pod = template["spec"]
        containers = pod.get("containers", [])
        if len(containers) != 1:
            self.fail(path, f"want one container, found {len(containers)}")
            return None
        c = containers[0]
        image = c.get("image", "")
        name, _, tag = image.rpartition(":")
        if name.rsplit("/", 1)[-1] != want_image:
            self.fail(path, f"image {image} is not {want_image}")
        if images and image not in images:
            self.fail(path, f"image {image} is not one the Containerfile says it builds "
                            f"({', '.join(sorted(images))})")
        volumes = {}
        for v in pod.get("volumes", []):
            volumes[v["name"]] = v
            sec = (v.get("secret") or {}).get("secretName")
            if sec is not None and sec not in secrets:
                self.fail(path, f"volume {v['name']}: Secret {sec} is not in the manifests "
                                f"(secrets.example.yaml)")
        for e in c.get("env", []):
            ref = (e.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                if ref["name"] not in secrets:
                    self.fail(path, f"env {e['name']}: Secret {ref['name']} is not in the manifests")
                elif ref["key"] not in secrets[ref["name"]]:
                    self.fail(path, f"env {e['name']}: Secret {ref['name']} has no key {ref['key']}")
        mounts = {}
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes and m["name"] not in claims:
                self.fail(path, f"volumeMount {m['name']} has no volume or volumeClaimTemplate")
            mounts[m["mountPath"].rstrip("/")] = m["name"]
        # A file flag under a Secret's mount names one of that Secret's keys.
        for a in c.get("args", []):
            if not a.startswith("/"):
                continue
            parent, _, key = a.rpartition("/")
            vol = volumes.get(mounts.get(parent, ""))
            sec = (vol or {}).get("secret", {}).get("secretName") if vol else None
            if sec in secrets and key not in secrets[sec]:
                self.fail(path, f"{a}: Secret {sec} (mounted at {parent}) has no key {key}")
        return c

    # --- Containerfile ------------------------------------------------------------------------
    def check_containerfile(self):
        path = os.path.join(self.root, "container", "Containerfile")
        if not os.path.exists(path):
            self.fail(self.root, "no container/Containerfile")
            return set()
        text = open(path).read()
        stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.M | re.I))
        for s in ("server", "worker"):
            if s not in stages:
                self.fail(path, f"no `FROM ... AS {s}` stage")
        images = set()
        for target, tag in re.findall(r"--target\s+(\S+)\s+-t\s+(\S+)", text):
            images.add(tag)
            want = SERVER_IMAGE if target == "server" else WORKER_IMAGE
            if tag.rpartition(":")[0].rsplit("/", 1)[-1] != want:
                self.fail(path, f"--target {target} is tagged {tag}, not {want}")
        if not images:
            self.fail(path, "no `--target T -t IMAGE` build line to tell the images' names")
        exposed = set(re.findall(r"^EXPOSE\s+(.*)$", text, re.M))
        exposed = {int(p) for line in exposed for p in line.split()}
        for stage, body in re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)\s*$(.*?)(?=^FROM\s|\Z)", text,
                                      re.M | re.S | re.I):
            for cmd in re.findall(r"^CMD\s+(\[.*\])\s*$", body, re.M):
                words = yaml.safe_load(cmd)
                self.check_flags(path, words)
                for flag in ("--listen", "--http"):
                    v = arg_value(words, flag)
                    if v and int(v.rsplit(":", 1)[1]) not in exposed:
                        self.fail(path, f"{stage}: {flag} {v} is not EXPOSEd")
        return images


def arg_value(args, flag):
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return str(args[i + 1])
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def run(root, tessel):
    c = Checker(root, tessel)
    images = c.check_containerfile()
    c.check_kubernetes(images)
    c.check_systemd()
    return c.problems


BREAKAGES = [
    ("kubernetes/worker.yaml", "tessel-server.tessel.svc:7070", "tessel-server.tessel.svc:7071",
     "the Service's grpc port is 7070"),
    ("kubernetes/worker.yaml", "secretName: tessel-ca", "secretName: tessel-cax",
     "Secret tessel-cax is not in the manifests"),
    ("kubernetes/server.yaml", "image: ghcr.io/tessel/tessel-server:0.1.0",
     "image: ghcr.io/tessel/tessel-server:0.2.0", "is not one the Containerfile says it builds"),
    ("kubernetes/server.yaml", "      targetPort: http", "      targetPort: https",
     "targetPort https is not a port of the server container"),
    ("kubernetes/server.yaml", "mountPath: /var/lib/tessel\n", "mountPath: /var/lib/log\n",
     "is not on the PersistentVolumeClaim's mount"),
    ("kubernetes/worker.yaml", "nvidia.com/gpu: 1", "example.com/gpu: 1",
     "does not request nvidia.com/gpu"),
    ("kubernetes/server.yaml", "  replicas: 1", "  replicas: [", "not valid YAML"),
    ("systemd/tessel-serve.service", "--http ${TESSEL_HTTP}", "--http ${TESSEL_HTTP_ADDR}",
     "ExecStart uses $TESSEL_HTTP_ADDR"),
    ("systemd/tessel-worker.service", "Restart=always", "Restart=no", "Restart= should be"),
    ("systemd/tessel-serve.service", "ProtectSystem=strict", "ProtectSystm=strict",
     "ProtectSystem"),
    ("kubernetes/server.yaml", "- --tokens", "- --tokenz", "has no flag --tokenz"),
]


def self_test(root, tessel):
    failures = []
    for rel, old, new, expect in BREAKAGES:
        if expect.startswith("has no flag") and not tessel:
            continue
        tmp = tempfile.mkdtemp(prefix="tessel_deploy_")
        try:
            copy = os.path.join(tmp, "deploy")
            shutil.copytree(root, copy)
            p = os.path.join(copy, rel)
            text = open(p).read()
            if old not in text:
                failures.append(f"self-test: {rel} no longer holds {old!r}")
                continue
            open(p, "w").write(text.replace(old, new, 1))
            problems = run(copy, tessel)
            if not any(expect in q for q in problems):
                failures.append(f"self-test: {rel} with {new!r} instead of {old!r} was not "
                                f"caught (want {expect!r}; got {problems})")
        finally:
            shutil.rmtree(tmp)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tessel", help="the tessel binary, to check every flag the files pass")
    ap.add_argument("--root", default=os.path.dirname(os.path.abspath(__file__)),
                    help="the deploy/ folder (default: this script's)")
    ap.add_argument("--self-test", action="store_true",
                    help="also check that broken copies are caught")
    a = ap.parse_args()
    problems = run(a.root, a.tessel)
    if a.self_test and not problems:
        problems += self_test(a.root, a.tessel)
    for p in problems:
        print(f"deploy check: {p}", file=sys.stderr)
    if problems:
        return 1
    print("deploy check: systemd units, Containerfile and Kubernetes manifests agree" +
          ("" if shutil.which("systemd-analyze") else " (systemd-analyze not installed)") +
          (" (self-test passed)" if a.self_test else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
