"""The fleet twin's GitOps side: a git host and a chart mirror over HTTPS, the real Argo CD, and the
platform's managers run where the engine installed them.

- `GitHost`: `git http-backend` and a Helm repository behind TLS on loopback (`git-https`, ours, Go's
  standard library), with a certificate from the test CA. Argo CD refuses plain-HTTP git.
- `chart_mirror`: the charts of their Go modules (Kueue, JobSet, the job operators, Loki), `helm package`d
  at the versions a cluster file pins, and the released monitoring charts of ../shared/upstream
  (kube-prometheus-stack, dcgm-exporter, gpu-operator), with `helm repo index`: what
  `gitops.chartMirror` names.
- `ArgoCD`: v3.6.1's application controller and repo server (one binary of ours, tests/upstream/argocd),
  its CRDs and the ConfigMaps and Secrets of its own `manifests/install.yaml` (not its workloads), and
  miniredis for their cache. The controller runs with `ARGOCD_FAKE_IN_CLUSTER`, so the in-cluster
  destination `https://kubernetes.default.svc` is the twin's API server.
- `Managers`: what a kubelet would do for the charts' controller pods, which kwok only pretends to run.
  Once the engine has applied a chart's Deployment, its configuration ConfigMap and its webhook Service,
  the real manager starts with that configuration, listening on the Service's ClusterIP and port (the
  twin's Service range is on loopback, so the API server's webhook calls reach it), and the certificate
  Secret its own cert-controller fills is written into its certDir as a Secret volume would be. A
  manager that exits is started again after the kubelet's crash-loop back-off (10 s, doubling, at most
  300 s): Kubeflow Trainer's exits when it starts before the API server serves its CRDs, as it can under
  Argo CD, which applies CRDs and the Deployment in one wave.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import yaml

from tests.upstream import pki, tools
from tests.upstream.cluster import Stack, _http_ok
from tests.upstream.processes import Process, StartError, free_port, spawn, wait_for, wait_until

ARGOCD_NAMESPACE = "argocd"
INSTALL_KINDS = ("ConfigMap", "Secret")
"""What the twin takes from Argo CD's `manifests/install.yaml`: its settings, not its workloads."""


def _run(argv: list[str], what: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})},
                          cwd=cwd)
    if proc.returncode != 0:
        raise StartError(f"{what} failed ({proc.returncode}):\n{proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


# ------------------------------------------------------------------------------------------ git host

RELEASED_AS_TAG = frozenset({"lws"})
"""Charts whose module keeps a placeholder version in Chart.yaml (0.1.0) and whose release script packages
them as the tag, `v` included (lws v0.9.0 hack/push-chart.sh), as the rendered installs ask for them."""


def chart_mirror(dest: Path, versions: dict[str, str], released: tuple[str, ...] = (),
                 trimmed: dict[str, tuple[str, dict[str, Any]]] | None = None) -> Path:
    """`helm package` each named chart of its module at `versions[name]` (a module tag), copy the
    `released` archives of ../shared/upstream (packaged from their release tags), package each `trimmed`
    module chart (name -> (module tag, the values the fleet gives it)) less the subcharts those values
    leave off (tools.trimmed_chart: Loki's module vendors none), then index."""
    dest.mkdir(parents=True, exist_ok=True)
    helm = str(tools.binary("helm"))
    for name, version in sorted(versions.items()):
        released_as = ["--version", version, "--app-version", version] if name in RELEASED_AS_TAG else []
        _run([helm, "package", str(tools.chart(name, version)), *released_as, "--destination", str(dest)],
             f"helm package {name}")
    for name in released:
        shutil.copy2(tools.shared_chart(name), dest / tools.SHARED_CHARTS[name][0])
    with tempfile.TemporaryDirectory(prefix="trimmed-charts-") as work:
        for name, (version, values) in sorted((trimmed or {}).items()):
            chart = tools.trimmed_chart(name, values, Path(work) / name, version)
            _run([helm, "package", str(chart), "--destination", str(dest)], f"helm package {name}")
    _run([helm, "repo", "index", str(dest)], "helm repo index")
    return dest


@dataclass
class GitHost:
    """Bare repositories at `<url>/git/<name>.git` and a chart repository at `<url>/charts`."""

    process: Process
    url: str
    repos: Path
    charts: Path
    ca_file: Path

    @classmethod
    def start(cls, workdir: Path, authority: pki.KeyPair) -> GitHost:
        workdir.mkdir(parents=True, exist_ok=True)
        repos, charts = workdir / "repos", workdir / "charts"
        repos.mkdir(exist_ok=True)
        charts.mkdir(exist_ok=True)
        crt, key = pki.issue(authority, "git-host", server=True, dns=("localhost",), ips=("127.0.0.1",)).write(
            workdir, "git-host")
        ca_file = workdir / "git-host-ca.crt"
        ca_file.write_bytes(authority.cert_pem)
        port = free_port()
        proc = spawn("git-https", [str(tools.binary("git-https")), f"-listen=127.0.0.1:{port}", f"-repos={repos}",
                                   f"-charts={charts}", f"-cert={crt}", f"-key={key}"], workdir / "git-https.log")
        host = cls(proc, f"https://127.0.0.1:{port}", repos, charts, ca_file)
        try:
            context = ssl.create_default_context(cafile=str(ca_file))
            wait_until(proc, lambda: _http_ok(f"{host.url}/charts/", context), 30, "serving")
        except BaseException:
            proc.stop()
            raise
        return host

    def repo_url(self, name: str) -> str:
        return f"{self.url}/git/{name}.git"

    @property
    def chart_url(self) -> str:
        return f"{self.url}/charts"

    def create(self, name: str) -> Path:
        """An empty bare repository; push to the returned path (the engine fetches over HTTPS)."""
        path = self.repos / f"{name}.git"
        _run(["git", "init", "-q", "--bare", "-b", "main", str(path)], "git init --bare")
        return path

    def stop(self) -> None:
        self.process.stop()


# ----------------------------------------------------------------------------------------- Argo CD

@dataclass
class Engine:
    """A GitOps engine's processes beside a Stack: installed as its project ships it, then started."""

    stack: Stack
    workdir: Path
    processes: dict[str, Process] = field(default_factory=dict)

    @classmethod
    def start(cls, stack: Stack, git: GitHost) -> Self:
        engine = cls(stack, stack.workdir / cls.__name__.lower())
        engine.workdir.mkdir(exist_ok=True)
        try:
            engine._install()
            engine._start(git)
        except BaseException:
            engine.stop()
            raise
        return engine

    def _install(self) -> None:
        raise NotImplementedError

    def _start(self, git: GitHost) -> None:
        raise NotImplementedError

    def kubectl(self, *args: str) -> str:
        return _run([str(tools.binary("kubectl")), f"--kubeconfig={self.stack.workdir / 'admin.kubeconfig'}", *args],
                    f"kubectl {' '.join(args)}")

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{proc.tail(25)}" for name, proc in self.processes.items())

    def stop(self) -> None:
        for proc in reversed(list(self.processes.values())):
            proc.stop()


RESYNC = ("--app-resync=30", "--app-resync-jitter=5")
"""The application controller's periodic refresh: every 30 s and up to 5 s more, not its default of
120 s and up to 60 s more (cmd/argocd-application-controller/commands/argocd_application_controller.go:43-45,
252-254 at v3.6.1; `timeout.reconciliation` in argocd-cm). A chart's CRDs carry no tracking annotation
(util/argo/resource_tracking.go:279-280, controller/cache/cache.go:592-594), so a CRD turning Established
after a sync refreshes no Application: the child stays Progressing, and its wave holds the next, until the
periodic refresh. Measured on prod-east's bootstrap with the defaults: 276 s on a quiet machine, 200 s of
it three children waiting for that refresh, and 863 s in CI beside the other test worker (Kueue's app alone
353 s). The waves' order, which is what the twin checks, does not depend on the period."""


@dataclass
class ArgoCD(Engine):
    """Argo CD v3.6.1's application controller and repo server for one twin cluster."""

    def _install(self) -> None:
        """Its CRDs, then its settings as its install manifest ships them (the platform team's step 0)."""
        module = tools.module_dir("argocd")
        self.kubectl("apply", "--server-side", "-k", str(module / "manifests" / "crds"))
        self.stack._wait_established(["applications.argoproj.io", "appprojects.argoproj.io"])
        settings = [d for d in yaml.safe_load_all((module / "manifests" / "install.yaml").read_text())
                    if d and d["kind"] in INSTALL_KINDS]
        path = self.workdir / "settings.yaml"
        path.write_text(yaml.safe_dump_all(settings))
        self.kubectl("create", "namespace", ARGOCD_NAMESPACE)
        self.kubectl("apply", "--server-side", "-n", ARGOCD_NAMESPACE, "-f", str(path))
        # The scripts and programs the repo server runs, as its image has them.
        bin_dir = self.workdir / "bin"
        bin_dir.mkdir(exist_ok=True)
        wrapper = bin_dir / "git-verify-wrapper.sh"
        shutil.copyfile(module / "hack" / "git-verify-wrapper.sh", wrapper)
        wrapper.chmod(0o755)
        for name in ("helm", "kustomize"):
            (bin_dir / name).symlink_to(tools.binary(name))

    def _start(self, git: GitHost) -> None:
        work, binary = self.workdir, str(tools.binary("argocd"))
        tls = work / "tls"
        tls.mkdir(exist_ok=True)
        (tls / "127.0.0.1").write_bytes(git.ca_file.read_bytes())  # Argo CD's TLS store: one file per host
        redis = f"127.0.0.1:{free_port()}"
        self.processes["redis"] = spawn("argocd-redis", [binary, redis], work / "redis.log",
                                        env={"ARGOCD_BINARY_NAME": "argocd-redis"})
        repo_port = free_port()
        path = f"{work / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
        # Its checkouts, git and helm wrappers go to TMPDIR, and its git ask-pass socket would be
        # /tmp/reposerver-ask-pass.sock, shared by every Argo CD on the machine (util/askpass/common.go:7-19
        # at v3.6.1): both in this twin's folder instead. A Unix socket's path holds at most 107 bytes.
        tmp = work / "tmp"
        tmp.mkdir(exist_ok=True)
        ask_pass = work / "askpass.sock"
        if len(os.fsencode(ask_pass)) > 100:
            ask_pass = Path(tempfile.mkdtemp(prefix="argocd-")) / "askpass.sock"
        self.processes["repo-server"] = spawn("argocd-repo-server", [
            binary, f"--port={repo_port}", "--address=127.0.0.1", f"--metrics-port={free_port()}",
            "--metrics-address=127.0.0.1", "--disable-tls", "--client-ca-path=", f"--redis={redis}", "--loglevel=info"],
            work / "repo-server.log",
            env={"ARGOCD_BINARY_NAME": "argocd-repo-server", "ARGOCD_GPG_ENABLED": "false",
                 "ARGOCD_TLS_DATA_PATH": str(tls), "PATH": path, "HOME": str(work), "TMPDIR": str(tmp),
                 "ARGOCD_ASK_PASS_SOCK": str(ask_pass)})
        wait_until(self.processes["repo-server"], lambda: _port_open(repo_port), 60, "listening")
        self.processes["application-controller"] = spawn("argocd-application-controller", [
            binary, f"--kubeconfig={self.stack.workdir / 'admin.kubeconfig'}", f"--namespace={ARGOCD_NAMESPACE}",
            f"--repo-server=127.0.0.1:{repo_port}", "--repo-server-plaintext", f"--redis={redis}",
            f"--metrics-port={free_port()}", "--loglevel=info", *RESYNC],
            work / "application-controller.log",
            # In-cluster, it reads the default kubeconfig (KUBECONFIG), not its --kubeconfig flag.
            env={"ARGOCD_BINARY_NAME": "argocd-application-controller", "ARGOCD_FAKE_IN_CLUSTER": "true",
                 "KUBECONFIG": str(self.stack.workdir / "admin.kubeconfig"), "HOME": str(work), "TMPDIR": str(tmp)})
        for proc in self.processes.values():
            if not proc.alive():
                raise StartError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.tail()}")

    def application(self, name: str) -> dict[str, Any]:
        from kubernetes import client

        api = client.CustomObjectsApi(self.stack.client())
        return dict(api.get_namespaced_custom_object("argoproj.io", "v1alpha1", ARGOCD_NAMESPACE, "applications",
                                                     name))

    def applications(self) -> list[dict[str, Any]]:
        from kubernetes import client

        api = client.CustomObjectsApi(self.stack.client())
        return list(api.list_namespaced_custom_object("argoproj.io", "v1alpha1", ARGOCD_NAMESPACE,
                                                      "applications")["items"])

    def refresh(self, name: str) -> None:
        """What a git webhook does: the Application is compared with git now, not at the next poll."""
        self.kubectl("annotate", "--overwrite", "-n", ARGOCD_NAMESPACE, f"application/{name}",
                     "argocd.argoproj.io/refresh=normal")


# -------------------------------------------------------------------------------------------- Flux

FLUX_NAMESPACE = "flux-system"
FLUX_CONTROLLERS = ("source-controller", "kustomize-controller", "helm-controller")
REQUEUE_DEPENDENCY = "30s"
"""kustomize- and helm-controller's `--requeue-dependency`, at flux2's default (what teams run)."""
"""What flux2 v2.9.5 installs that fleetgen's objects use (GitRepository, HelmRepository, OCIRepository;
Kustomization; HelmRelease)."""


@dataclass
class Flux(Engine):
    """Flux's source-, kustomize- and helm-controllers, with their CRDs from their own modules, run as
    flux2 v2.9.5 deploys them (leader election off, their namespace in RUNTIME_NAMESPACE)."""

    def _install(self) -> None:
        names = []
        for controller in FLUX_CONTROLLERS:
            crds = tools.module_dir(controller) / "config" / "crd"
            self.kubectl("apply", "--server-side", "-k", str(crds))
            names += [yaml.safe_load(p.read_text())["metadata"]["name"] for p in (crds / "bases").glob("*.yaml")]
        self.stack._wait_established(names)
        self.kubectl("create", "namespace", FLUX_NAMESPACE)

    def _start(self, git: GitHost) -> None:
        work, kubeconfig = self.workdir, str(self.stack.workdir / "admin.kubeconfig")
        env = {"RUNTIME_NAMESPACE": FLUX_NAMESPACE, "KUBECONFIG": kubeconfig, "SSL_CERT_FILE": str(git.ca_file),
               "HOME": str(work)}
        storage = free_port()
        (work / "storage").mkdir(exist_ok=True)
        extra = {"source-controller": [f"--storage-path={work / 'storage'}", f"--storage-addr=127.0.0.1:{storage}",
                                       f"--storage-adv-addr=127.0.0.1:{storage}"],
                 "kustomize-controller": [f"--requeue-dependency={REQUEUE_DEPENDENCY}"],
                 "helm-controller": [f"--requeue-dependency={REQUEUE_DEPENDENCY}"]}
        for controller in FLUX_CONTROLLERS:
            health = free_port()
            self.processes[controller] = spawn(controller, [
                str(tools.binary(controller)), "--enable-leader-election=false", "--metrics-addr=127.0.0.1:0",
                f"--health-addr=127.0.0.1:{health}", "--log-level=info", *extra[controller]],
                work / f"{controller}.log", env=env)
            readyz = f"http://127.0.0.1:{health}/readyz"
            wait_until(self.processes[controller], lambda u=readyz: _http_ok(u), 60, "ready")

    def objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        from kubernetes import client

        api = client.CustomObjectsApi(self.stack.client())
        return list(api.list_namespaced_custom_object(group, version, FLUX_NAMESPACE, plural)["items"])

    def flux(self, *args: str) -> str:
        """The flux CLI (v2.9.5, built from its module) against the twin, as a platform engineer runs it."""
        return _run([str(tools.binary("flux")), f"--kubeconfig={self.stack.workdir / 'admin.kubeconfig'}",
                     f"--namespace={FLUX_NAMESPACE}", *args], f"flux {' '.join(args)}")

    def reconcile(self, *what: str) -> str:
        """`flux reconcile source git NAME` or `flux reconcile kustomization NAME`: what a Flux Receiver does
        on a git push, reconcile now rather than at the interval. It returns once that object has handled
        the request and is Ready again (it fails, saying why, if it does not become Ready)."""
        return self.flux("reconcile", *what)

def ready(obj: dict[str, Any]) -> bool:
    """A Flux object's Ready condition is True for its current generation."""
    status = obj.get("status") or {}
    return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []) \
        and status.get("observedGeneration") == obj["metadata"].get("generation")


def _port_open(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


# ---------------------------------------------------------------------------------------- managers

@dataclass(frozen=True)
class Manager:
    """How a chart's controller pod is run in the twin."""

    name: str
    namespace: str
    deployment: str
    config_map: str
    config_key: str
    secret: str
    services: dict[str, str]
    """configuration section -> Service whose ClusterIP and port it listens on."""


@dataclass(frozen=True)
class ArgsManager:
    """A chart's controller configured by its container's arguments, not a configuration file: the Prometheus
    operator of kube-prometheus-stack. It is run with exactly its Deployment's arguments, less the listen
    address, which becomes its Service's ClusterIP and port (where the API server calls its admission
    webhook); its TLS Secret is mounted where the Deployment mounts it."""

    name: str
    namespace: str
    deployment: str
    secret: str
    service: str
    listen_flag: str = "--web.listen-address"


ARGS_MANAGERS = (
    ArgsManager("prometheus-operator", "monitoring", "kube-prometheus-stack-operator",
                "kube-prometheus-stack-admission", "kube-prometheus-stack-operator"),
)


MANAGERS = (
    Manager("jobset", "jobset-system", "jobset-controller", "jobset-controller-config",
            "controller_manager_config.yaml", "jobset-webhook-server-cert", {"webhook": "jobset-webhook-service"}),
    Manager("kueue", "kueue-system", "kueue-controller-manager", "kueue-manager-config",
            "controller_manager_config.yaml", "kueue-webhook-server-cert",
            {"webhook": "kueue-webhook-service", "visibilityServer": "kueue-visibility-server"}),
    # Kubeflow Trainer's (`operators.trainer`): its webhook is the Service's `webhook-server` port.
    Manager("kubeflow-trainer", "kubeflow-system", "kubeflow-trainer-controller-manager", "kubeflow-trainer-config",
            "controller_manager_config.yaml", "kubeflow-trainer-webhook-cert",
            {"webhook": "kubeflow-trainer-controller-manager"}),
)


@dataclass
class Managers:
    """Starts each chart's real manager once the engine has applied what its pod would be given."""

    stack: Stack
    processes: dict[str, Process] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=dict)
    _restart_at: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _certgen_done: set[str] = field(default_factory=set)
    _certgen_jobs: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _watcher: threading.Thread | None = None
    _templates: dict[str, str] = field(default_factory=dict)
    """Manager -> its Deployment's pod template when it was started: a new template (an upgrade's image,
    say) rolls it, as the Deployment controller replaces the pod."""
    rolled: dict[str, list[str]] = field(default_factory=dict)
    """Manager -> the builds it was started from, in order (one per pod it rolled to)."""

    def start(self) -> Managers:
        self._watcher = threading.Thread(target=self._watch_jobs, name="twin-certgen-jobs", daemon=True)
        self._watcher.start()
        self._thread = threading.Thread(target=self._loop, name="twin-managers", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            for step, name in ((self._certgen, "webhook certificates"),
                               *((lambda m=m: self._step(m), m.name) for m in MANAGERS),
                               *((lambda m=m: self._step_args(m), m.name) for m in ARGS_MANAGERS)):
                try:
                    step()
                except Exception as exc:  # noqa: BLE001 - kept for the test's failure message
                    self.problems.append(f"{name}: {exc}")

    def _watch_jobs(self) -> None:
        """Every kube-webhook-certgen Job created, seen by a watch (the chart's hook Jobs are deleted
        once they succeed, seconds after they are made: a periodic list could miss one)."""
        from kubernetes import client, watch

        api = client.BatchV1Api(self.stack.client())
        while not self._stop.is_set():
            try:
                for event in watch.Watch().stream(api.list_job_for_all_namespaces, timeout_seconds=5):
                    job = event["object"]
                    container = job.spec.template.spec.containers[0]
                    if event["type"] == "ADDED" and "kube-webhook-certgen" in (container.image or ""):
                        verb, *flags = container.args or [""]
                        with self._lock:
                            self._certgen_jobs[f"{job.metadata.namespace}/{job.metadata.name}/{job.metadata.uid}"] = (
                                verb, dict(f.removeprefix("--").split("=", 1) for f in flags if "=" in f))
                    if self._stop.is_set():
                        return
            except Exception as exc:  # noqa: BLE001 - kept for the test's failure message; the watch resumes
                self.problems.append(f"watching Jobs: {exc}")
                self._stop.wait(1.0)

    def _certgen(self) -> None:
        """What kube-webhook-certgen's Jobs do (the chart's admission hooks; the Go module proxy does not
        serve that program), from each Job's own arguments: `create` writes a Secret with a CA and a
        serving certificate for the `--host` names (keys ca, cert, key: its defaults) unless it exists;
        `patch` puts that CA into the named webhook configurations' caBundle once the Secret exists."""
        import base64

        from kubernetes import client

        with self._lock:
            pending = {k: v for k, v in self._certgen_jobs.items() if k not in self._certgen_done}
        for key, (verb, opts) in sorted(pending.items()):
            namespace, secret = opts["namespace"], opts["secret-name"]
            existing = self._get(f"/api/v1/namespaces/{namespace}/secrets/{secret}")
            if verb == "create" and not existing:
                authority = pki.ca(f"{secret}-ca")
                serving = pki.issue(authority, opts["host"].split(",")[0], server=True,
                                    dns=tuple(opts["host"].split(",")))
                data = {"ca": authority.cert_pem, "cert": serving.cert_pem, "key": serving.key_pem}
                client.CoreV1Api(self.stack.client()).create_namespaced_secret(namespace, {
                    "metadata": {"name": secret}, "data": {k: base64.b64encode(v).decode() for k, v in data.items()}})
            elif verb == "patch":
                if not existing:
                    continue  # its create Job has not been played yet: the next look patches
                admission = client.AdmissionregistrationV1Api(self.stack.client())
                bundle = existing["data"]["ca"]
                for read, patch in ((admission.read_validating_webhook_configuration,
                                     admission.patch_validating_webhook_configuration),
                                    (admission.read_mutating_webhook_configuration,
                                     admission.patch_mutating_webhook_configuration)):
                    config = read(opts["webhook-name"])
                    hooks = [{"name": w.name, "clientConfig": {"caBundle": bundle},
                              **({"failurePolicy": opts["patch-failure-policy"]}
                                 if opts.get("patch-failure-policy") else {})} for w in config.webhooks or []]
                    patch(opts["webhook-name"], {"webhooks": hooks})
            self._certgen_done.add(key)

    def _step_args(self, m: ArgsManager) -> None:
        due = self._due(m.name, m.namespace, m.secret, bool)
        if due is None:
            return
        certs, secret = due
        deployment = self._get(f"/apis/apps/v1/namespaces/{m.namespace}/deployments/{m.deployment}")
        service = self._get(f"/api/v1/namespaces/{m.namespace}/services/{m.service}")
        if not deployment or not service or not (secret or {}).get("data"):
            return
        address = f"{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"
        args = [a if not a.startswith(f"{m.listen_flag}=") else f"{m.listen_flag}={address}"
                for a in deployment["spec"]["template"]["spec"]["containers"][0].get("args") or []]
        self._launch(m.name, deployment, m.secret, certs, [str(tools.binary(m.name)), *args], {})

    def _get(self, path: str) -> dict[str, Any] | None:
        """The object, or None while it is absent (Stack._get answers {} then): a kubelet starts no pod
        whose Secret volume is missing, so no manager starts before its certificate Secret exists."""
        return self.stack._get(path) or None

    def _roll(self, m: Manager) -> None:
        """Stop a running manager whose Deployment's pod template changed: the next step starts the new one."""
        proc = self.processes.get(m.name)
        if proc is None or not proc.alive() or m.name not in self._templates:
            return
        deployment = self._get(f"/apis/apps/v1/namespaces/{m.namespace}/deployments/{m.deployment}")
        if deployment and _template(deployment) != self._templates[m.name]:
            self.processes.pop(m.name).stop()
            self.restarts[m.name] = self.restarts.get(m.name, 0) + 1  # the new pod's log beside the old one's

    def _step(self, m: Manager) -> None:
        self._roll(m)
        due = self._due(m.name, m.namespace, m.secret, lambda data: bool(data.get("tls.crt")))
        if due is None:
            return
        certs, secret = due
        deployment = self._get(f"/apis/apps/v1/namespaces/{m.namespace}/deployments/{m.deployment}")
        config_map = self._get(f"/api/v1/namespaces/{m.namespace}/configmaps/{m.config_map}")
        services = {section: self._get(f"/api/v1/namespaces/{m.namespace}/services/{name}")
                    for section, name in m.services.items()}
        if not deployment or not config_map or not all(services.values()) or secret is None:
            return
        config = yaml.safe_load(config_map["data"][m.config_key])
        certs.mkdir(exist_ok=True)
        health = free_port()
        flags = []
        if m.name == "kueue" and not str(config.get("apiVersion", "")).endswith("/v1beta2"):
            # v1beta1 (Kueue v0.15.2's, as fleetgen renders it) has no visibilityServer settings: the server
            # would bind 0.0.0.0:8082, once per machine; off, as the stack's own Kueue does (cluster.py).
            services.pop("visibilityServer", None)
            flags.append("--feature-gates=VisibilityOnDemand=false")
        for section, service in services.items():
            assert service is not None
            ports = service["spec"]["ports"]  # the section's own port where the Service names it, else its first
            port = next((p["port"] for p in ports if section in str(p.get("name"))), ports[0]["port"])
            ip = service["spec"]["clusterIP"]
            if section == "webhook":
                config["webhook"] = {**(config.get("webhook") or {}), "host": ip, "port": port}
            else:
                config[section] = {**(config.get(section) or {}), "bindAddress": ip, "bindPort": port}
        config.update({"health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
                       "metrics": {**(config.get("metrics") or {}), "bindAddress": "0"},
                       "leaderElection": {"leaderElect": False}})
        path = self.stack.workdir / f"{m.name}-managed-config.yaml"
        path.write_text(yaml.safe_dump(config))
        argv = [str(_build(m.name, deployment)), f"--config={path}", f"--kubeconfig={self._kubeconfig}",
                "--zap-log-level=info", *flags]
        self.rolled.setdefault(m.name, []).append(Path(argv[0]).name)
        self._launch(m.name, deployment, m.secret, certs, argv, {"POD_NAMESPACE": m.namespace})

    @property
    def _kubeconfig(self) -> str:
        return str(self.stack.workdir / "admin.kubeconfig")

    def _due(self, name: str, namespace: str, secret_name: str,
             filled: Callable[[dict[str, str]], bool]) -> tuple[Path, dict[str, Any] | None] | None:
        """The manager's certificate Secret written where it reads it once `filled`, as a kubelet keeps a
        Secret volume current; then None while the manager runs, else its certificate folder and Secret."""
        certs = self.stack.workdir / f"{name}-managed-certs"
        secret = self._get(f"/api/v1/namespaces/{namespace}/secrets/{secret_name}")
        if secret and filled(secret.get("data") or {}):
            _write_secret_volume(certs, secret["data"])
        if name in self.processes and not self._exited(name):
            return None
        return certs, secret

    def _launch(self, name: str, deployment: dict[str, Any], secret_name: str, certs: Path, argv: list[str],
                env: dict[str, str]) -> None:
        """The manager started with its Deployment's volumes mounted where its container has them."""
        self._templates[name] = _template(deployment)
        run = self.restarts.get(name, 0)
        self.processes[name] = spawn(
            f"{name} (chart)", _in_pod_filesystem(_volumes(deployment, secret_name, certs, self.stack.workdir / name),
                                                  argv),
            self.stack.workdir / f"{name}-managed.{run}.log", env={"KUBECONFIG": self._kubeconfig, **env})

    def _exited(self, name: str) -> bool:
        """Whether `name`'s manager has exited and its back-off has passed, so it is to be started again."""
        proc = self.processes[name]
        if proc.alive():
            return False
        if name not in self._restart_at:
            run = self.restarts.get(name, 0)
            self.problems.append(f"{name}: exited ({proc.popen.returncode}) on run {run}:\n{proc.tail(8)}")
            self._restart_at[name] = time.monotonic() + min(10.0 * 2 ** run, 300.0)
        if time.monotonic() < self._restart_at[name]:
            return False
        del self._restart_at[name]
        self.restarts[name] = self.restarts.get(name, 0) + 1
        return True

    def logs(self) -> str:
        return "\n".join([*self.problems[-5:], *(f"--- {n}\n{p.tail(25)}" for n, p in self.processes.items())])

    def stop(self) -> None:
        self._stop.set()
        for thread in (self._thread, self._watcher):
            if thread is not None:
                thread.join(timeout=10)
        for proc in self.processes.values():
            proc.stop()


def _template(deployment: dict[str, Any]) -> str:
    return json.dumps(deployment["spec"]["template"], sort_keys=True)


def _build(name: str, deployment: dict[str, Any]) -> Path:
    """The build of the release the Deployment runs: another release built here as `<name>-v<version>` (Kueue
    v0.15.2 for the upgrade stories) where its image tag or its chart's `helm.sh/chart` label names one, else
    the pinned build. (A chart packaged from its module names a branch image, `release-0.15`, where the
    published chart names the release: the label says which release the chart is.)"""
    image = deployment["spec"]["template"]["spec"]["containers"][0].get("image") or ""
    tag = image.split("@")[0].rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""
    chart = ((deployment["metadata"].get("labels") or {}).get("helm.sh/chart") or "").rsplit("-", 1)[-1]
    for version in (tag, chart):
        other = f"{name}-v{version.removeprefix('v')}"
        if version and other in tools.BY_NAME:
            return tools.binary(other)
    return tools.binary(name)


def _volumes(deployment: dict[str, Any], secret: str, certs: Path, scratch: Path) -> dict[str, Path]:
    """mountPath -> folder for the manager container's volumes, as its kubelet would mount them: the
    certificate Secret's (kept current by `_write_secret_volume`) and each emptyDir (a fresh folder).
    ConfigMap mounts are left out: the manager gets the ConfigMap's content by --config."""
    spec = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    mounts: dict[str, Path] = {}
    for mount in spec["containers"][0].get("volumeMounts") or []:
        volume = volumes.get(mount["name"]) or {}
        if (volume.get("secret") or {}).get("secretName") == secret:
            mounts[mount["mountPath"]] = certs
        elif "emptyDir" in volume:
            mounts[mount["mountPath"]] = scratch / mount["name"]
            mounts[mount["mountPath"]].mkdir(parents=True, exist_ok=True)
    return mounts


def _in_pod_filesystem(mounts: dict[str, Path], argv: list[str]) -> list[str]:
    """argv run in a mount namespace of its own where each folder is bind-mounted at its mountPath, so
    paths a manager has built in find their volumes and two twins never share them. JobSet v0.12.0's
    certificate rotator, for one, waits for its certificates at a fixed /tmp/k8s-webhook-server/serving-certs
    (pkg/util/cert/cert.go:30,61), whatever the configuration's webhook.certDir says. Needs root (CI is)."""
    if not mounts:
        return argv
    if os.geteuid() != 0:
        raise StartError("the chart managers need root: their volumes are bind-mounted in a mount namespace")
    script = " && ".join(f"mkdir -p {shlex.quote(target)} && mount --bind {shlex.quote(str(source))} "
                         f"{shlex.quote(target)}" for target, source in sorted(mounts.items()))
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{script} && exec "$@"', "sh", *argv]


def _write_secret_volume(folder: Path, data: dict[str, str]) -> None:
    """A Secret's keys as files, replaced whole when they change (as the kubelet updates a volume)."""
    import base64

    folder.mkdir(parents=True, exist_ok=True)
    for key, value in data.items():
        target = folder / key
        content = base64.b64decode(value)
        if not target.is_file() or target.read_bytes() != content:
            staged = folder / f".{key}.tmp"
            staged.write_bytes(content)
            os.replace(staged, target)


def wait_healthy(argocd: ArgoCD, names: list[str], seconds: float,
                 each_look: Callable[[], None] | None = None) -> dict[str, float]:
    """Seconds until each named Application is Synced and Healthy (missing from the result: it was not).
    Applications found so in the same look get the same time; `each_look` runs before every look."""
    started, done = time.monotonic(), {}

    def look() -> bool:
        if each_look is not None:
            each_look()
        now = time.monotonic() - started
        for app in argocd.applications():
            name, status = app["metadata"]["name"], app.get("status") or {}
            if name in names and name not in done and (status.get("sync") or {}).get("status") == "Synced" \
                    and (status.get("health") or {}).get("status") == "Healthy":
                done[name] = now
        return all(n in done for n in names)

    wait_for(look, seconds, step=1.0)
    return done
