"""A real Kubernetes control plane for the tests: etcd, kube-apiserver, kube-controller-manager,
Kueue and JobSet, all built from their Go modules (tools.py) and run on loopback.

    etcd = Etcd.start(workdir)                       # one per test session
    stack = Stack.start(workdir / "prod-east", etcd, kueue_config=rendered_configuration)
    api = stack.client()                             # admin (system:masters)
    alice = stack.client(user="alice@acme.com", groups=("ml-research",))
    stack.stop()

What runs, and why:
- etcd; each Stack keeps its data under its own `--etcd-prefix`, so stacks never see each other.
- kube-apiserver with RBAC only (no AlwaysAllow), x509 client certificates signed by the stack's
  CA (a team member is a certificate with CN=user, O=groups, as with an OIDC or cert login),
  service-account tokens (TokenRequest) and an audit log of every write.
- kube-controller-manager with six controllers: ClusterRole aggregation (the bootstrap `edit`,
  `admin` and `view` roles are empty until it fills them), garbage collection (JobSet Jobs,
  foreground deletion), namespace deletion, service accounts (each namespace's `default`,
  which pods need), disruption (PodDisruptionBudget status, which the eviction API
  enforces) and resource quotas (a ResourceQuota's status, without which admission refuses
  every pod of its namespace). No scheduler and no kubelet: Jobs are created, pods are not run.
- Kueue v0.19.2 and JobSet v0.12.0 managers, with the CRDs, webhook configurations and
  ClusterRoles of their own `config/default` (tools.py keeps `kustomize build` of it). Webhook and
  conversion client configs are pointed at the local managers (a URL on 127.0.0.1 instead of the
  in-cluster Service). Kueue keeps its internal certificate management, as in a default install:
  the fixture puts a CA and a serving certificate valid for both the Service name and 127.0.0.1
  into the Secret cert-controller manages, and cert-controller adopts them. JobSet's internal
  certificate manager writes to a fixed /tmp path shared by every JobSet on the machine
  (pkg/util/cert/cert.go:29 at v0.12.0), so JobSet is given its certificates instead.
"""

from __future__ import annotations

import copy
import json
import os
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tests.upstream import pki, tools
from tests.upstream.processes import (
    Process,
    StartError,
    free_port,
    spawn,
    start_with_retry,
    wait_for,
    wait_until,
)

if TYPE_CHECKING:
    from generator.connection import Connection

ADMIN = "fleetgen-test-admin"
KUEUE_WEBHOOK_SECRET = "kueue-webhook-server-cert"
SERVICE_CIDR = "10.0.0.0/24"
"""Only addresses handed to Services; nothing ever connects to them (no Service-based webhooks)."""
CONTROLLERS = ("clusterrole-aggregation-controller,garbage-collector-controller,namespace-controller,"
               "serviceaccount-controller,disruption-controller,resourcequota-controller")
INSTALLED_KINDS = ("Namespace", "CustomResourceDefinition", "MutatingWebhookConfiguration",
                   "ValidatingWebhookConfiguration", "ClusterRole")
"""What the managers' manifests contribute. Not their Deployments, Services, ServiceAccounts and
bindings (the managers run here as processes with admin credentials) nor APIServices (Kueue's
visibility API needs a reachable Service)."""
VISIBILITY_CERTS = Path("/visibility")
"""Where Kueue's visibility server reads or writes its serving certificate: fixed in the binary
(sigs.k8s.io/kueue v0.19.2 pkg/visibility/server.go:66, certDir). Where it cannot be written here
the visibility API stays off and the tests that need it skip with that reason."""
VISIBILITY_VERSIONS = ("v1beta2", "v1beta1")
AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                "rules": [{"level": "Metadata", "verbs": ["list", "watch"],
                           "resources": [{"group": "", "resources": ["nodes"]}]},
                          {"level": "None", "verbs": ["get", "list", "watch"]}, {"level": "Metadata"}]}
"""Every write, and node lists and watches (the reconciler's pagination and node cache are checked
on them); no other reads."""


def _visibility_certificates() -> str:
    """Make sure Kueue's visibility server finds a serving certificate; '' when it will, else why not."""
    crt, key = VISIBILITY_CERTS / "tls.crt", VISIBILITY_CERTS / "tls.key"
    if crt.is_file() and key.is_file():
        return ""
    try:
        VISIBILITY_CERTS.mkdir(exist_ok=True)
        authority = pki.ca("kueue-visibility-test")
        serving = pki.issue(authority, "localhost", server=True, dns=("localhost",), ips=("127.0.0.1",))
        for path, data in ((key, serving.key_pem), (crt, serving.cert_pem)):
            partial = path.with_name(f".{path.name}.{os.getpid()}")
            partial.write_bytes(data)
            partial.replace(path)  # atomic: parallel stacks may race here
    except OSError as exc:
        return f"Kueue's visibility server needs {VISIBILITY_CERTS} (fixed in its binary), not writable: {exc}"
    return ""


def missing_tools() -> list[str]:
    return tools.missing()


# --------------------------------------------------------------------------------------------- etcd


@dataclass
class Etcd:
    """One etcd for the whole test session."""

    process: Process
    url: str

    @classmethod
    def start(cls, workdir: Path) -> Etcd:
        workdir.mkdir(parents=True, exist_ok=True)

        def attempt() -> Etcd:
            client, peer = free_port(), free_port()
            url = f"http://127.0.0.1:{client}"
            proc = spawn("etcd", [
                str(tools.binary("etcd")), "--name", "fleetgen-test", "--data-dir", str(workdir / f"data-{client}"),
                "--listen-client-urls", url, "--advertise-client-urls", url,
                "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer}", "--initial-cluster", f"fleetgen-test=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync", "--log-level", "warn", "--quota-backend-bytes", str(4 << 30),
            ], workdir / "etcd.log")
            try:
                wait_until(proc, lambda: _http_json(f"{url}/health").get("health") == "true", 30, "healthy")
            except StartError:
                proc.stop()
                raise
            return cls(proc, url)

        return start_with_retry(attempt)

    def stop(self) -> None:
        self.process.stop()


def _http_json(url: str, context: ssl.SSLContext | None = None) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=2, context=context) as resp:  # noqa: S310 - loopback only
        return json.loads(resp.read().decode())


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    with urllib.request.urlopen(url, timeout=2, context=context) as resp:  # noqa: S310 - loopback only
        return 200 <= resp.status < 300


# -------------------------------------------------------------------------------------------- stack


@dataclass
class Identity:
    """A kubeconfig that authenticates as a user (client certificate) or with a bearer token."""

    kubeconfig: Path
    user: str


@dataclass
class Stack:
    """A control plane with Kueue and JobSet, on loopback. See the module docstring."""

    workdir: Path
    server: str
    ca: pki.KeyPair
    processes: dict[str, Process] = field(default_factory=dict)
    identities: dict[tuple[str, tuple[str, ...]], Identity] = field(default_factory=dict)
    kueue_config: dict[str, Any] = field(default_factory=dict)
    visibility: str = ""
    """Empty when Kueue's visibility API is served through the aggregator; else why it is not."""
    service_cidr: str = SERVICE_CIDR
    """Where Services get their ClusterIPs. The fleet twin uses a loopback range: the API server calls a
    chart's webhook at its Service's ClusterIP, where the twin runs the manager."""
    extra_controllers: tuple[str, ...] = ()
    """kube-controller-manager controllers beyond CONTROLLERS (e.g. job-controller, whose pods
    then exist as objects but never start: no scheduler, no kubelet)."""
    kueue_tool: str = "kueue"
    """The Kueue release running: a tool of tests/upstream/tools.py (binary and install manifests)."""

    # ------------------------------------------------------------------------------- starting

    @classmethod
    def start(cls, workdir: Path, etcd: Etcd, kueue_config: dict[str, Any] | None = None,
              extra_controllers: tuple[str, ...] = (), crds: tuple[dict[str, Any], ...] = (),
              platform: bool = True, service_cidr: str = SERVICE_CIDR, kueue_tool: str = "kueue") -> Stack:
        """Everything up and answering; on any failure everything started so far is stopped.
        `crds` are installed before Kueue starts (it only runs controllers whose APIs are served).
        Without `platform`, only the control plane: a GitOps engine installs Kueue and JobSet."""
        workdir.mkdir(parents=True, exist_ok=True)
        authority = pki.ca("fleetgen-test-ca")
        authority.write(workdir, "ca")
        stack = cls(workdir, "", authority, extra_controllers=extra_controllers, service_cidr=service_cidr,
                    kueue_tool=kueue_tool)
        try:
            stack._start_apiserver(etcd)
            stack._start_controller_manager()
            if not platform:
                return stack
            stack._install_manifests()
            if crds:
                from kubernetes import utils

                for crd in crds:
                    utils.create_from_dict(stack.client(), crd)
                stack._wait_established([c["metadata"]["name"] for c in crds])
            stack._start_jobset()
            stack._start_kueue(kueue_config)
            stack._wait_for_webhooks()
        except BaseException:
            stack.stop()
            raise
        return stack

    def _start_apiserver(self, etcd: Etcd) -> None:
        work = self.workdir
        serving = pki.issue(self.ca, "kube-apiserver", server=True,
                            dns=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
                            ips=("127.0.0.1", "10.0.0.1"))
        crt, key = serving.write(work, "apiserver")
        sa_key, sa_pub = pki.signing_key(work)
        (work / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        prefix = f"/fleetgen-{uuid.uuid4().hex[:12]}"
        admin = pki.issue(self.ca, ADMIN, orgs=("system:masters",))
        admin_crt, admin_key = admin.write(work, "admin")
        # The aggregation layer (for Kueue's visibility API): the API server proxies as
        # front-proxy-client and extension servers trust the front-proxy CA for the X-Remote headers.
        front_ca = pki.ca("front-proxy-ca")
        front_ca.write(work, "front-proxy-ca")
        proxy_crt, proxy_key = pki.issue(front_ca, "front-proxy-client").write(work, "front-proxy-client")

        def attempt() -> Process:
            port = free_port()
            self.server = f"https://127.0.0.1:{port}"
            proc = spawn("kube-apiserver", [
                str(tools.binary("kube-apiserver")), f"--etcd-servers={etcd.url}", f"--etcd-prefix={prefix}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
                f"--tls-cert-file={crt}", f"--tls-private-key-file={key}", f"--client-ca-file={work / 'ca.crt'}",
                "--authorization-mode=RBAC", "--anonymous-auth=false",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={sa_pub}", f"--service-account-signing-key-file={sa_key}",
                f"--service-cluster-ip-range={self.service_cidr}", "--allow-privileged=true", "--profiling=false",
                f"--audit-policy-file={work / 'audit-policy.yaml'}", f"--audit-log-path={work / 'audit.log'}",
                "--audit-log-format=json", "--audit-log-mode=blocking",
                f"--cert-dir={work / 'apiserver-certs'}",
                f"--requestheader-client-ca-file={work / 'front-proxy-ca.crt'}",
                "--requestheader-allowed-names=front-proxy-client", "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group", "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={proxy_crt}", f"--proxy-client-key-file={proxy_key}",
            ], work / "kube-apiserver.log")
            try:
                wait_until(proc, lambda: _http_ok(f"{self.server}/readyz", self._admin_tls()), 90, "ready")
            except StartError:
                proc.stop()
                raise
            return proc

        self.processes["kube-apiserver"] = start_with_retry(attempt)
        self._kubeconfig(work / "admin.kubeconfig", ADMIN, cert=(admin_crt, admin_key))
        self.identities[(ADMIN, ())] = Identity(work / "admin.kubeconfig", ADMIN)

    def _start_controller_manager(self) -> None:
        proc = spawn("kube-controller-manager", [
            str(tools.binary("kube-controller-manager")), f"--kubeconfig={self.workdir / 'admin.kubeconfig'}",
            f"--controllers={','.join([CONTROLLERS, *self.extra_controllers])}", "--leader-elect=false",
            # For serviceaccount-token-controller when asked for: it fills token Secrets.
            f"--service-account-private-key-file={self.workdir / 'sa.key'}",
            f"--root-ca-file={self.workdir / 'ca.crt'}",
            "--secure-port=0", "--use-service-account-credentials=false",
        ], self.workdir / "kube-controller-manager.log")
        self.processes["kube-controller-manager"] = proc
        # Ready when it has filled the bootstrap `edit` role from the aggregate-to-edit roles.
        wait_until(proc, lambda: bool(self._get("/apis/rbac.authorization.k8s.io/v1/clusterroles/edit").get("rules")),
                   60, "aggregating ClusterRoles")

    # --------------------------------------------------------------------------- manifests

    def _manager_objects(self, name: str) -> list[dict[str, Any]]:
        text = tools.manifests(name).read_text()
        return [d for d in yaml.safe_load_all(text) if d]

    def _install_manifests(self) -> None:
        self.kueue_port, self.jobset_port = free_port(), free_port()
        kueue_ca = pki.ca("kueue-ca")
        self.kueue_ca = kueue_ca
        kueue_serving = pki.issue(kueue_ca, "kueue-webhook-service", server=True,
                                  dns=("kueue-webhook-service.kueue-system.svc",), ips=("127.0.0.1",))
        jobset_ca = pki.ca("jobset-ca")
        jobset_serving = pki.issue(jobset_ca, "jobset-webhook-service", server=True,
                                   dns=("jobset-webhook-service.jobset-system.svc",), ips=("127.0.0.1",))
        self.jobset_certs = self.workdir / "jobset-certs"
        self.jobset_certs.mkdir(exist_ok=True)
        jobset_serving.write(self.jobset_certs, "tls")
        objects = []
        for name, port, authority in ((self.kueue_tool, self.kueue_port, kueue_ca),
                                      ("jobset", self.jobset_port, jobset_ca)):
            for obj in self._manager_objects(name):
                if obj["kind"] in INSTALLED_KINDS:
                    objects.append(_point_at_local(obj, port, authority.cert_pem))
        order = {kind: i for i, kind in enumerate(INSTALLED_KINDS)}
        objects.sort(key=lambda o: order[o["kind"]])
        api = self.client()
        from kubernetes import utils

        crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
        for obj in objects:
            utils.create_from_dict(api, obj)
        self._wait_established([c["metadata"]["name"] for c in crds])
        # cert-controller adopts a valid CA and serving certificate it finds in its Secret, then waits
        # until the files in its certDir match the Secret (in a pod, a Secret volume); write them.
        self.kueue_certs = self.workdir / "kueue-certs"
        self.kueue_certs.mkdir(exist_ok=True)
        kueue_ca.write(self.kueue_certs, "ca")
        kueue_serving.write(self.kueue_certs, "tls")
        self.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                     "metadata": {"name": KUEUE_WEBHOOK_SECRET, "namespace": "kueue-system"},
                     "stringData": {"ca.crt": kueue_ca.cert_pem.decode(), "ca.key": kueue_ca.key_pem.decode(),
                                    "tls.crt": kueue_serving.cert_pem.decode(),
                                    "tls.key": kueue_serving.key_pem.decode()}})

    def _wait_established(self, names: list[str]) -> None:
        pending = set(names)

        def established() -> bool:
            for name in sorted(pending):
                crd = self._get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
                if conds.get("Established") == "True":
                    pending.discard(name)
            return not pending

        if not wait_for(established, 60, step=0.2):
            raise StartError(f"CRDs not established after 60 s: {sorted(pending)}")

    # ---------------------------------------------------------------------------- managers

    def _start_jobset(self) -> None:
        health = free_port()
        config = {"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
                  "internalCertManagement": {"enable": False},
                  "webhook": {"port": self.jobset_port, "host": "127.0.0.1", "certDir": str(self.jobset_certs)},
                  "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
                  "metrics": {"bindAddress": "0"}, "leaderElection": {"leaderElect": False}}
        path = self.workdir / "jobset-config.yaml"
        path.write_text(yaml.safe_dump(config))
        proc = spawn("jobset", [str(tools.binary("jobset")), f"--config={path}", "--zap-log-level=info"],
                     self.workdir / "jobset.log", env={"KUBECONFIG": str(self.workdir / "admin.kubeconfig")})
        self.processes["jobset"] = proc
        wait_until(proc, lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"), 60, "ready")

    def _start_kueue(self, base: dict[str, Any] | None) -> None:
        config = copy.deepcopy(base) if base is not None else self.default_kueue_config()
        health = free_port()
        # Only where and how it listens changes; what it does is the configuration given.
        config.update({
            "namespace": "kueue-system",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "metrics": {**(config.get("metrics") or {}), "bindAddress": "0"},
            "webhook": {"port": self.kueue_port, "host": "127.0.0.1", "certDir": str(self.kueue_certs)},
            "leaderElection": {"leaderElect": False},
        })
        # The visibility API server authenticates and authorizes through the kubeconfig named by the
        # --kubeconfig flag (pkg/visibility/server.go:117-122), serves on the port configured here,
        # and is reached through an APIService whose ExternalName Service points at localhost.
        flags = [f"--kubeconfig={self.workdir / 'admin.kubeconfig'}"]
        self.visibility = _visibility_certificates()
        if not self.visibility and not str(config.get("apiVersion", "")).endswith("/v1beta2"):
            # v1beta1 has no visibilityServer settings: it would bind 0.0.0.0:8082, once per machine.
            self.visibility = f"visibility API port configurable only in v1beta2, not {config.get('apiVersion')}"
        visibility_port = free_port()
        if self.visibility:
            flags.append("--feature-gates=VisibilityOnDemand=false")
        else:
            config["visibilityServer"] = {"bindAddress": "127.0.0.1", "bindPort": visibility_port}
        self.kueue_config = config
        path = self.workdir / "kueue-config.yaml"
        path.write_text(yaml.safe_dump(config))
        proc = spawn("kueue", [str(tools.binary(self.kueue_tool)), f"--config={path}", "--zap-log-level=2", *flags],
                     self.workdir / "kueue.log", env={"KUBECONFIG": str(self.workdir / "admin.kubeconfig")})
        self.processes["kueue"] = proc
        wait_until(proc, lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"), 90, "ready")
        if not self.visibility:
            self._register_visibility(visibility_port)

    def upgrade_kueue(self, tool: str, config: dict[str, Any] | None = None) -> None:
        """Replace the running Kueue by release `tool` as an upgrade does: the manager stopped, the new
        release's install manifests applied over the old (CRDs with their storage version, webhooks, roles),
        the manager started again on the same webhook port and certificates with `config`."""
        self.processes.pop("kueue").stop()
        self.kueue_tool = tool
        objects = sorted((_point_at_local(o, self.kueue_port, self.kueue_ca.cert_pem)
                          for o in self._manager_objects(tool) if o["kind"] in INSTALLED_KINDS),
                         key=lambda o: INSTALLED_KINDS.index(o["kind"]))
        dynamic = self.dynamic()
        for obj in objects:
            dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).server_side_apply(
                body=obj, name=obj["metadata"]["name"], field_manager="kueue-upgrade", force_conflicts=True)
        self._wait_established([o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"])
        if not self.visibility:  # served again, on a new port
            for version in VISIBILITY_VERSIONS:
                dynamic.resources.get(api_version="apiregistration.k8s.io/v1", kind="APIService").delete(
                    name=f"{version}.visibility.kueue.x-k8s.io")
            dynamic.resources.get(api_version="v1", kind="Service").delete(name="kueue-visibility-server",
                                                                           namespace="kueue-system")
        self._start_kueue(config)
        self._wait_for_webhooks()

    def _register_visibility(self, port: int) -> None:
        """Kueue's APIServices, as its manifests declare them, served by this stack's manager."""
        self.create({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": "kueue-visibility-server", "namespace": "kueue-system"},
                     "spec": {"type": "ExternalName", "externalName": "localhost"}})
        for version in VISIBILITY_VERSIONS:
            self.create({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                         "metadata": {"name": f"{version}.visibility.kueue.x-k8s.io"},
                         "spec": {"group": "visibility.kueue.x-k8s.io", "version": version,
                                  "groupPriorityMinimum": 100, "versionPriority": 100 if version == "v1beta2" else 90,
                                  "insecureSkipTLSVerify": True,  # a self-signed serving certificate
                                  "service": {"name": "kueue-visibility-server", "namespace": "kueue-system",
                                              "port": port}}})

        def available() -> bool:
            conditions = (self._get("/apis/apiregistration.k8s.io/v1/apiservices/v1beta2.visibility.kueue.x-k8s.io")
                          .get("status") or {}).get("conditions") or []
            return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)

        wait_until(self.processes["kueue"], available, 60, "serving its visibility API")

    def _wait_for_webhooks(self) -> None:
        """Dry-run creates that pass through every webhook of both managers (Kueue mutates JobSets too)."""
        cluster_queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                         "metadata": {"name": "webhook-probe"}, "spec": {"namespaceSelector": {}}}
        jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                  "metadata": {"name": "webhook-probe", "namespace": "default"},
                  "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {
                      "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}]}}
        wait_until(self.processes["kueue"], lambda: self._dry_run_create(cluster_queue), 60, "answering its webhooks")
        wait_until(self.processes["jobset"], lambda: self._dry_run_create(jobset), 60, "answering its webhooks")

    def default_kueue_config(self) -> dict[str, Any]:
        """The Configuration Kueue's own manifests ship (config/components/manager)."""
        for obj in self._manager_objects(self.kueue_tool):
            if obj["kind"] == "ConfigMap" and "controller_manager_config.yaml" in (obj.get("data") or {}):
                return dict(yaml.safe_load(obj["data"]["controller_manager_config.yaml"]))
        raise StartError("Kueue's manifests carry no manager ConfigMap")

    # ----------------------------------------------------------------------------- clients

    def _kubeconfig(self, path: Path, user: str, *, cert: tuple[Path, Path] | None = None,
                    token: str | None = None) -> None:
        credentials: dict[str, Any] = ({"client-certificate": str(cert[0]), "client-key": str(cert[1])} if cert
                                       else {"token": token})
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": "test",
               "clusters": [{"name": "test", "cluster": {"server": self.server,
                                                          "certificate-authority": str(self.workdir / "ca.crt")}}],
               "users": [{"name": user, "user": credentials}],
               "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}]}
        path.write_text(yaml.safe_dump(doc))

    def identity(self, user: str = ADMIN, groups: tuple[str, ...] = ()) -> Identity:
        """A kubeconfig with a client certificate for `user` in `groups` (made once, then reused)."""
        key = (user, tuple(groups))
        if key not in self.identities:
            stem = f"user-{len(self.identities)}"
            crt, pem = pki.issue(self.ca, user, orgs=tuple(groups)).write(self.workdir, stem)
            path = self.workdir / f"{stem}.kubeconfig"
            self._kubeconfig(path, user, cert=(crt, pem))
            self.identities[key] = Identity(path, user)
        return self.identities[key]

    def token_identity(self, namespace: str, service_account: str, seconds: int = 3600) -> Identity:
        """A kubeconfig with a TokenRequest token of a ServiceAccount (which must exist)."""
        from kubernetes import client

        core = client.CoreV1Api(self.client())
        request = core.create_namespaced_service_account_token(
            service_account, namespace, {"spec": {"expirationSeconds": seconds}})
        path = self.workdir / f"sa-{namespace}-{service_account}-{uuid.uuid4().hex[:6]}.kubeconfig"
        user = f"system:serviceaccount:{namespace}:{service_account}"
        self._kubeconfig(path, user, token=request.status.token)
        return Identity(path, user)

    def client(self, user: str = ADMIN, groups: tuple[str, ...] = ()) -> Any:
        """An ApiClient of the official client, authenticated as `user` in `groups`."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.identity(user, groups).kubeconfig))

    def connection(self, user: str = ADMIN, groups: tuple[str, ...] = ()) -> Connection:
        """`client` as the SDK and the reconciler take it: a Connection (generator.connection)."""
        from generator.connection import Connection

        return Connection(self.client(user, groups))

    def dynamic(self, api: Any = None) -> Any:
        """The official client's DynamicClient over `api` (default admin), its discovery cache in this
        stack's folder: the client's default is a file in /tmp named after host and port, which outlives
        the run and may be read by a later server on the same port."""
        from kubernetes import dynamic

        return dynamic.DynamicClient(api or self.client(), cache_file=str(self.workdir / "discovery.json"))

    def _admin_tls(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.workdir / "ca.crt"))
        context.load_cert_chain(str(self.workdir / "admin.crt"), str(self.workdir / "admin.key"))
        return context

    def _get(self, path: str) -> dict[str, Any]:
        """GET `path` as admin; {} when absent or not served (yet)."""
        try:
            return _http_json(f"{self.server}{path}", self._admin_tls())
        except (OSError, ValueError):
            return {}

    def create(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """POST an object as admin (any kind the server serves)."""
        resource = self.dynamic().resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        kwargs: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
        namespace = obj["metadata"].get("namespace")
        return dict(resource.create(body=obj, namespace=namespace, **kwargs).to_dict())

    def _dry_run_create(self, obj: dict[str, Any]) -> bool:
        self.create(obj, dry_run=True)
        return True

    # ---------------------------------------------------------------------------- reading

    def audit(self) -> Iterator[dict[str, Any]]:
        """The audit log's events (writes and node lists): user, verb, objectRef, responseStatus, userAgent."""
        try:
            text = (self.workdir / "audit.log").read_text()
        except OSError:
            return
        # The API server may be writing the last event as it is read: only whole lines are events
        # (a run in CI read one cut short and failed on its JSON).
        for line in text.split("\n")[:-1]:
            if line.strip():
                yield json.loads(line)

    def logs(self, name: str, lines: int = 60) -> str:
        return self.processes[name].tail(lines)

    def stop(self) -> None:
        """Processes a test added (operators) first, then the managers, the API server last."""
        core = ("kueue", "jobset", "kube-controller-manager", "kube-apiserver")
        for name in [n for n in self.processes if n not in core] + list(core):
            if name in self.processes:
                self.processes[name].stop()


AUTOSCALER_APIS = "k8s.io/autoscaler/cluster-autoscaler/apis"


def provisioning_request_crd() -> dict[str, Any]:
    """The cluster autoscaler's ProvisioningRequest CRD, from the module Kueue itself builds against
    (its go.mod pins the version): what a cluster whose autoscaler serves ProvisioningRequests has."""
    path = tools.module_file(AUTOSCALER_APIS, "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml")
    return dict(yaml.safe_load(path.read_text()))


def _point_at_local(obj: dict[str, Any], port: int, ca_pem: bytes) -> dict[str, Any]:
    """The object with every webhook/conversion Service reference replaced by a URL on 127.0.0.1."""
    import base64

    obj = copy.deepcopy(obj)
    bundle = base64.b64encode(ca_pem).decode()

    def rewrite(client_config: dict[str, Any]) -> dict[str, Any]:
        service = client_config.get("service") or {}
        return {"url": f"https://127.0.0.1:{port}{service.get('path') or '/'}", "caBundle": bundle}

    if obj["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in obj.get("webhooks") or []:
            hook["clientConfig"] = rewrite(hook.get("clientConfig") or {})
    elif obj["kind"] == "CustomResourceDefinition":
        webhook = ((obj.get("spec") or {}).get("conversion") or {}).get("webhook")
        if webhook:
            webhook["clientConfig"] = rewrite(webhook.get("clientConfig") or {})
    return obj
