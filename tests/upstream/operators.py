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
    from kubernetes import client, utils

    client.CoreV1Api(stack.client()).create_namespace({"metadata": {"name": namespace}})
    for doc in docs:
        if doc["kind"] in WEBHOOKED:
            utils.create_from_dict(stack.client(), _point_at_local(doc, port, authority.cert_pem), namespace=namespace)
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap" and "controller_manager_config.yaml" in d["data"]]
    return dict(yaml.safe_load(configmap["data"]["controller_manager_config.yaml"]))


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


def start_trainer(stack: Stack, workdir: Path, cluster: str = CLUSTER) -> Process:
    """The chart's objects applied, then the controller with the chart's configuration (the ConfigMap
    the Deployment mounts) under its ServiceAccount's token. Only where it listens and who provides its
    serving certificate change: controller-runtime reads it from $TMPDIR/k8s-webhook-server/serving-certs."""
    docs = helm_template("kubeflow-trainer", cluster, TRAINER_NAMESPACE, workdir)
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
    proc = spawn("kubeflow-trainer", [str(tools.binary("kubeflow-trainer")), f"--config={path}"],
                 workdir / "trainer.log", env={"KUBECONFIG": str(who.kubeconfig), "TMPDIR": str(tmp)})
    wait_until(proc, lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"), 90, "ready")
    for doc in docs:  # admitted by the controller's own webhook, so once it answers
        if doc["kind"] == "ClusterTrainingRuntime":
            wait_until(proc, lambda doc=doc: _runtime_created(stack, doc), 60,  # type: ignore[misc]
                       "admitting its runtime")
    return proc


def _runtime_created(stack: Stack, doc: dict[str, Any]) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        custom(stack).create_cluster_custom_object(TRAINER, TRAINER_VERSION, "clustertrainingruntimes", doc)
    except ApiException as exc:
        if exc.status == 409:
            return True
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
