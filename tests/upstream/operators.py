"""The job operators a cluster file turns on, started on a Stack as their charts deploy them: the KubeRay
operator, Kubeflow Trainer's controller manager and LeaderWorkerSet's controller, each built from its Go
module at the pin (tools.py), with the CRDs its chart ships.

Each starter applies what `helm template` makes of the cluster's rendered values (charts.helm_template):
the operator's ServiceAccount, RBAC, Services and webhook configurations, then runs the binary with the
chart's args or configuration under a token of its ServiceAccount. Only where it listens changes (and, for
the two with webhooks, who provides the serving certificate: a CA of the test's instead of their own
cert-controller, the webhook configurations pointed at the process on 127.0.0.1).

    with operator_twin("prod-east", etcd, workdir, ray_crds(), start_kuberay) as (stack, fleet, twin):
        ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.upstream import pki, tools
from tests.upstream.charts import helm_template
from tests.upstream.cluster import Stack, _http_ok, _point_at_local
from tests.upstream.fleet import KUEUE, custom
from tests.upstream.processes import Process, free_port, spawn, wait_until
from tests.upstream.twin import pods

CLUSTER = "prod-east"
"""The cluster whose values the operators start with unless asked: the one that turns all three on."""
WEBHOOKED = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service",
             "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
"""What of Trainer's and LeaderWorkerSet's charts is applied before the controller starts: its identity,
rights and webhooks (its Deployment is the process started here; its Secret is what its cert-controller
would fill, here disabled)."""


def chart_crds(chart: str) -> tuple[dict[str, Any], ...]:
    """The CRDs a chart of its Go module ships (its `crds/` folder)."""
    folder = tools.chart(chart) / "crds"
    return tuple(yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yaml")))


def _serving_certificate(ca: str, name: str, namespace: str, certs: Path) -> pki.KeyPair:
    """A CA of the test's (`ca`), and `tls.crt`/`tls.key` in `certs` for the Service `name` and 127.0.0.1;
    the CA."""
    authority = pki.ca(ca)
    serving = pki.issue(authority, name, server=True, dns=(f"{name}.{namespace}.svc",), ips=("127.0.0.1",))
    certs.mkdir(parents=True)
    serving.write(certs, "tls")
    return authority


def _apply_webhooked(stack: Stack, docs: list[dict[str, Any]], namespace: str, port: int,
                     authority: pki.KeyPair) -> dict[str, Any]:
    """The chart's namespace and WEBHOOKED objects (webhooks pointed at 127.0.0.1:`port`, trusting
    `authority`) created; the configuration its Deployment mounts (`controller_manager_config.yaml`)."""
    _server_side_apply(stack, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for doc in docs:
        if doc["kind"] in WEBHOOKED:
            _server_side_apply(stack, _point_at_local(doc, port, authority.cert_pem), namespace)
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap" and "controller_manager_config.yaml" in d["data"]]
    return dict(yaml.safe_load(configmap["data"]["controller_manager_config.yaml"]))


def _server_side_apply(stack: Stack, doc: dict[str, Any], namespace: str | None = None) -> None:
    """Create or update `doc` as a chart's install or upgrade does (an upgrade finds the objects there)."""
    kind = stack.dynamic().resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    kind.server_side_apply(body=doc, name=doc["metadata"]["name"], namespace=namespace if kind.namespaced else None,
                           field_manager="helm", force_conflicts=True)


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod spec of the chart's one Deployment."""
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    return dict(deployment["spec"]["template"]["spec"])


# ------------------------------------------------------------------------------------------ KubeRay


RAY = "ray.io"
RAY_NAMESPACE = "kuberay-system"
RAY_SERVED = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service")
"""What of the chart the twin applies: the operator's identity and rights (its Deployment is the process
started here; its ServiceMonitor needs Prometheus's CRDs)."""


def ray_crds() -> tuple[dict[str, Any], ...]:
    return chart_crds("kuberay-operator")


def start_kuberay(stack: Stack, workdir: Path, cluster: str = CLUSTER) -> Process:
    """The chart's objects applied, then the operator with the chart's args and its ServiceAccount's token;
    the leader-election namespace is the one a pod would read from its token mount."""
    from kubernetes import client, utils

    docs = helm_template("kuberay-operator", cluster, RAY_NAMESPACE, workdir)
    client.CoreV1Api(stack.client()).create_namespace({"metadata": {"name": RAY_NAMESPACE}})
    for doc in docs:
        if doc["kind"] in RAY_SERVED:
            utils.create_from_dict(stack.client(), doc, namespace=RAY_NAMESPACE)
    pod = _pod(docs)
    (container,) = pod["containers"]
    health, metrics = free_port(), free_port()
    args = [*container["args"], f"--leader-election-namespace={RAY_NAMESPACE}",
            f"--health-probe-bind-address=127.0.0.1:{health}", f"--metrics-addr=127.0.0.1:{metrics}"]
    who = stack.token_identity(RAY_NAMESPACE, pod["serviceAccountName"])
    proc = spawn("kuberay-operator", [str(tools.binary("kuberay-operator")), *args], workdir / f"kuberay-{cluster}.log",
                 env={"KUBECONFIG": str(who.kubeconfig)})
    wait_until(proc, lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"), 60, "ready")
    return proc


def ray_all_gone(stack: Stack, namespace: str) -> bool:
    """No RayCluster, Workload or Ray pod left in the namespace: the next test starts on an empty queue."""
    objects = custom(stack)
    return not (objects.list_namespaced_custom_object(RAY, "v1", namespace, "rayclusters")["items"]
                or objects.list_namespaced_custom_object(KUEUE, "v1beta2", namespace, "workloads")["items"]
                or pods(stack, namespace, "ray.io/cluster"))


# ------------------------------------------------------------------------------- Kubeflow Trainer


TRAINER, TRAINER_VERSION = "trainer.kubeflow.org", "v1alpha1"
TRAINER_NAMESPACE = "kubeflow-system"


def trainer_crds() -> tuple[dict[str, Any], ...]:
    return chart_crds("kubeflow-trainer")


def start_trainer(stack: Stack, workdir: Path, cluster: str = CLUSTER, version: str = "",
                  tool: str = "kubeflow-trainer") -> Process:
    """The chart's objects applied (at the release the cluster renders, or `version` with the binary `tool`:
    over an older one's, as an upgrade does), then the controller with the chart's configuration (the ConfigMap
    the Deployment mounts) under its ServiceAccount's token, then its runtimes. Only where it listens and who
    provides its serving certificate change: controller-runtime reads it from
    $TMPDIR/k8s-webhook-server/serving-certs."""
    docs = helm_template("kubeflow-trainer", cluster, TRAINER_NAMESPACE, workdir, version)
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]  # chart templates from Trainer 2.3 on
    for crd in crds:
        _server_side_apply(stack, crd)
    if crds:
        stack._wait_established([c["metadata"]["name"] for c in crds])
    port, health = free_port(), free_port()
    tmp = workdir / "trainer-tmp"
    authority = _serving_certificate("kubeflow-trainer-ca", "kubeflow-trainer-controller-manager", TRAINER_NAMESPACE,
                                     tmp / "k8s-webhook-server" / "serving-certs")
    config = _apply_webhooked(stack, docs, TRAINER_NAMESPACE, port, authority)
    config["webhook"] = {"port": port, "host": "127.0.0.1"}
    config["health"]["healthProbeBindAddress"] = f"127.0.0.1:{health}"
    config["metrics"] = {"bindAddress": "0"}
    config["leaderElection"]["resourceNamespace"] = TRAINER_NAMESPACE
    config["certManagement"]["enable"] = False
    path = workdir / "trainer-config.yaml"
    path.write_text(yaml.safe_dump(config))
    who = stack.token_identity(TRAINER_NAMESPACE, _pod(docs)["serviceAccountName"])
    proc = spawn("kubeflow-trainer", [str(tools.binary(tool)), f"--config={path}"],
                 workdir / "trainer.log", env={"KUBECONFIG": str(who.kubeconfig), "TMPDIR": str(tmp)})
    wait_until(proc, lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"), 90, "ready")
    for doc in trainer_runtimes(docs):  # admitted by the controller's own webhook, so once it answers
        wait_until(proc, lambda doc=doc: _runtime_applied(stack, doc), 60,  # type: ignore[misc]
                   "admitting its runtime")
    return proc


def trainer_runtimes(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chart's ClusterTrainingRuntimes: its own objects up to Trainer 2.2, from 2.3 what its post-install
    hook Job applies (`kubectl apply --server-side` of its ConfigMap's runtimes.yaml: the twin's pods run no
    program, so the twin applies it)."""
    found = [d for d in docs if d["kind"] == "ClusterTrainingRuntime"]
    for doc in docs:
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"].endswith("-runtimes-installer"):
            found += [d for text in doc["data"].values() for d in yaml.safe_load_all(text)
                      if d and d.get("kind") == "ClusterTrainingRuntime"]
    return found


def _runtime_applied(stack: Stack, doc: dict[str, Any]) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        _server_side_apply(stack, doc)
    except ApiException as exc:
        if exc.status >= 500:  # the webhook not answering yet
            return False
        raise
    return True


# -------------------------------------------------------------------------------- LeaderWorkerSet


LWS = "leaderworkerset.x-k8s.io"
LWS_NAMESPACE = "lws-system"


def lws_crds() -> tuple[dict[str, Any], ...]:
    return chart_crds("lws")


def start_lws(stack: Stack, workdir: Path, cluster: str = CLUSTER) -> Process:
    """The chart's objects applied, then the controller with the chart's configuration (the ConfigMap the
    Deployment mounts) under its ServiceAccount's token; it listens on loopback with a certificate issued
    here instead of its own cert-controller's."""
    docs = helm_template("lws", cluster, LWS_NAMESPACE, workdir)
    port, health = free_port(), free_port()
    certs = workdir / "lws-certs"
    authority = _serving_certificate("lws-ca", "lws-webhook-service", LWS_NAMESPACE, certs)
    config = _apply_webhooked(stack, docs, LWS_NAMESPACE, port, authority)
    config["webhook"] = {"port": port, "host": "127.0.0.1", "certDir": str(certs)}
    config["health"] = {"healthProbeBindAddress": f"127.0.0.1:{health}"}
    config["metrics"] = {"bindAddress": "0"}
    config["internalCertManagement"] = {"enable": False}
    path = workdir / "lws-config.yaml"
    path.write_text(yaml.safe_dump(config))
    pod = _pod(docs)
    (container,) = pod["containers"]
    args = [a for a in container["args"] if not a.startswith("--config=")]
    who = stack.token_identity(LWS_NAMESPACE, pod["serviceAccountName"])
    proc = spawn("lws", [str(tools.binary("lws")), f"--config={path}", *args], workdir / "lws.log",
                 env={"KUBECONFIG": str(who.kubeconfig)})
    wait_until(proc, lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"), 90, "ready")
    return proc
