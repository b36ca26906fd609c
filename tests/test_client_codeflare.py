"""Issue 56, the CodeFlare SDK's Cluster as a team member uses it, on prod-east's fleet twin.

The SDK (`codeflare-sdk` 0.40.1: tests/upstream/pyenvs.py) runs in its own environment with a member's
kubeconfig, against tests/test_ray.py's twin: the real KubeRay operator, Kueue and scheduler, with the rights
fleetgen renders. What it calls (codeflare_sdk of 0.40.1; recorded below as the client sends it):

- The first call of a process authenticates through kube-authkit (common/kubernetes_cluster/auth.py:120-128:
  the kubeconfig KUBECONFIG names, checked with GET /apis/authentication.k8s.io/).
- `Cluster(ClusterConfiguration(...))` builds the RayCluster at once (ray/cluster/cluster.py:115): without
  `local_queue` it lists the namespace's LocalQueues (kueue.x-k8s.io/v1beta1) and labels it with the one
  annotated `kueue.x-k8s.io/default-queue: "true"` (ray/cluster/build_ray_cluster.py:255-321), which fleetgen
  renders on each team namespace's `default` LocalQueue.
- `apply()` lists RayClusters to check the CRD is served (cluster.py:359-375), discovers the API (a
  DynamicClient, :244-246) and server-side applies the RayCluster (:1221-1232); then it polls the namespace's
  Secrets labelled ray.openshift.ai/cluster-name for a CA secret (:287-356) that only Red Hat's KubeRay build
  creates, so on upstream KubeRay it waits its whole `timeout` (default 300 s) and says "TLS setup incomplete".
- `status()` lists RayClusters (:1277-1293), then looks for a dashboard: Gateway API HTTPRoutes cluster-wide,
  then in the namespace and four platform namespaces (:1530-1600; refused here, as members have no Gateway
  API rights, and ignored), OpenShift's route API in discovery (GET /apis/, :1516-1526) and the namespace's
  Ingresses (:1358-1375). Right after Kueue admits it, KubeRay may still report it suspended.
- `wait_ready()` polls `status()` until KubeRay says ready (:518-534), then reads the CA secret (none: a
  warning, :536-548) and, with `dashboard_check` (the default), waits for a Route or Ingress named for the
  cluster (:551-569), which the SDK never asks KubeRay for (`enableIngress: False`,
  build_ray_cluster.py:108): on plain Kubernetes only `dashboard_check=False` returns.
- `details()` is `status()` and the dashboard lookup again (:572-591, :1460-1512); `down()` lists
  RayClusters, deletes this one and removes its local certificates (:378-401).
- `list_all_queued()` lists RayClusters and kueue.x-k8s.io/v1beta1 Workloads (:876-908, :841-873).

The SDK reports an API error by printing it (common/kubernetes_cluster/kube_api_helpers.py:76-112), not by
raising, except where it raises its own RuntimeError (cluster.py:368-375).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.config.fleet import Fleet
from tests.upstream import pyenvs
from tests.upstream.cluster import Stack
from tests.upstream.fleet import KUEUE, condition, custom, fake_nodes
from tests.upstream.operators import RAY, ray_all_gone, ray_crds, start_kuberay
from tests.upstream.processes import wait_for
from tests.upstream.twin import MANAGED, Twin, operator_twin, pods

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, OTHER, NAME = "prod-east", "ml-research", "llm-pretrain", "notebook"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

CLIENT = '''
import contextlib, io, json, sys
from codeflare_sdk import Cluster, ClusterConfiguration
from codeflare_sdk.ray.cluster import list_all_queued

request = json.load(sys.stdin)
cluster = None
out = []
for call in request["calls"]:
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            if call == "Cluster":
                cluster = Cluster(ClusterConfiguration(
                    name=request["name"], namespace=request["namespace"],
                    worker_extended_resource_requests={"nvidia.com/gpu": request["worker_gpus"]}))
                got = cluster.resource_yaml["metadata"].get("labels")
            elif call == "apply":
                got = cluster.apply(timeout=request["apply_timeout"])
            elif call == "status":
                status, ready = cluster.status()
                got = [status.name, ready]
            elif call == "wait_ready":
                got = cluster.wait_ready(timeout=request["ready_timeout"], dashboard_check=False)
            elif call == "details":
                details = cluster.details()
                got = [details.status.value, details.num_workers, details.worker_extended_resources,
                       details.dashboard]
            elif call == "list_all_queued":
                got = [c.name for c in list_all_queued(request["namespace"])]
            elif call == "down":
                got = cluster.down()
        out.append({"ok": got})
    except Exception as exc:
        out.append({"error": f"{type(exc).__name__}: {exc}"})
    out[-1]["printed"], out[-1]["calls"], CALLS[:] = printed.getvalue(), list(CALLS), []
with open(sys.argv[1], "w") as answer:
    json.dump(out, answer)
'''
"""The SDK's calls on one Cluster, in order: each one's answer ("ok") or error, what it printed and the requests
it sent."""


@pytest.fixture(scope="module")
def codeflare_sdk() -> str:
    pyenvs.required("codeflare", "the CodeFlare SDK")
    return "codeflare"


@pytest.fixture(scope="module")
def ray_twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    with operator_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp(f"codeflare-{CLUSTER}"), ray_crds(),
                       start_kuberay) as running:
        yield running


def request(namespace: str, *calls: str) -> dict[str, Any]:
    """One Cluster of the SDK's defaults but the namespace and one 8-GPU worker, the H100 pool's nodes;
    `apply` waits 5 s of its 300 for a CA secret upstream KubeRay never makes."""
    return {"name": NAME, "namespace": namespace, "worker_gpus": 8, "apply_timeout": 5, "ready_timeout": 90,
            "calls": list(calls)}


def calls(steps: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    """Every request of `steps`, once."""
    return sorted({(method, path, status) for step in steps for method, path, status in step["calls"]})


def test_a_member_brings_a_cluster_up_on_the_default_queue_follows_it_and_takes_it_down(
        ray_twin: tuple[Stack, Fleet, Twin], codeflare_sdk: str, tmp_path: Path) -> None:
    """As a member of ml-research, with the SDK's defaults: `Cluster(...)` labels the RayCluster with the
    namespace's default-queue LocalQueue, `apply()` creates it, Kueue admits it on the team's ClusterQueue
    (head in the CPU pool, the 8-GPU worker in H100), its pods are bound there; `status()`, `wait_ready()`,
    `details()` and `list_all_queued()` follow it, and `down()` removes it with its pods. A member of
    llm-pretrain is refused the same on ml-research's namespace, and the member's cluster stays."""
    stack, fleet, twin = ray_twin
    team, other = fleet.teams[TEAM].config, fleet.teams[OTHER].config
    cluster = fleet.clusters[CLUSTER].config
    ns = team.namespace_names[0]
    member = stack.identity(f"codeflare@{TEAM}.test", (team.members.groups[0],)).kubeconfig
    outsider = stack.identity(f"codeflare@{OTHER}.test", (other.members.groups[0],)).kubeconfig
    objects = custom(stack)

    made, applied = pyenvs.run_client(codeflare_sdk, CLIENT, request(ns, "Cluster", "apply"), member,
                                      tmp_path / "member")
    assert made.get("ok", {}).get(QUEUE_LABEL) == "default", made
    assert "ok" in applied and "TLS setup incomplete" in applied["printed"], applied
    body = objects.get_namespaced_custom_object(RAY, "v1", ns, "rayclusters", NAME)
    assert body["metadata"]["labels"][QUEUE_LABEL] == "default", body["metadata"]

    def workload() -> dict[str, Any] | None:
        found = objects.list_namespaced_custom_object(KUEUE, "v1beta2", ns, "workloads", label_selector=(
            f"kueue.x-k8s.io/job-uid={body['metadata']['uid']}"))["items"]
        return found[0] if found else None
    assert wait_for(lambda: condition(workload(), "Admitted").get("status") == "True", 60), workload()
    admitted = workload()["status"]["admission"]  # type: ignore[index]
    assert admitted["clusterQueue"] == team.name, admitted
    podsets = {a["name"]: a for a in admitted["podSetAssignments"]}
    head, worker = podsets["head"], podsets[f"small-group-{NAME}"]  # the SDK's group name (build_ray_cluster.py:134)
    assert "nvidia.com/gpu" not in head["resourceUsage"] and (
        worker["flavors"]["nvidia.com/gpu"], worker["resourceUsage"]["nvidia.com/gpu"]) == ("h100", "8"), admitted
    pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(cluster)}

    def placed() -> dict[str, str]:
        found = [p for p in pods(stack, ns, f"ray.io/cluster={NAME}") if p.spec.node_name]
        return {p.metadata.labels["ray.io/node-type"]: pool_of[p.spec.node_name] for p in found} \
            if len(found) == 2 else {}
    where = wait_for(placed, 90)
    assert where == {"head": "cpu", "worker": "h100"}, f"{where}\n{twin.logs()}"

    refused = pyenvs.run_client(codeflare_sdk, CLIENT, request(ns, "Cluster", "apply", "status", "down"), outsider,
                                tmp_path / "outsider")
    made_there, apply_there, status_there, down_there = refused
    assert QUEUE_LABEL not in (made_there.get("ok") or {}), made_there  # it may not read ml-research's queues
    for step in (apply_there, down_there):
        assert step.get("error") == "RuntimeError: Failed to get RayCluster CustomResourceDefinition." \
            and "Access denied" in step["printed"], step
    assert status_there.get("ok") == ["UNKNOWN", False] and "Access denied" in status_there["printed"], status_there
    assert not [c for c in calls(refused) if c[0] != "GET"], calls(refused)  # no write was even tried
    assert objects.get_namespaced_custom_object(RAY, "v1", ns, "rayclusters", NAME)["metadata"]["uid"] \
        == body["metadata"]["uid"]

    followed = pyenvs.run_client(codeflare_sdk, CLIENT, request(
        ns, "Cluster", "wait_ready", "status", "details", "list_all_queued", "down"), member, tmp_path / "member")
    _, ready, status, details, queued, down = followed
    assert status.get("ok") == ["READY", True], status
    assert "ok" in ready and "Requested cluster is up and running!" in ready["printed"], ready
    assert details.get("ok") == ["ready", 1, {"nvidia.com/gpu": 8},
                                 "Dashboard not available yet, have you run cluster.apply()? Run cluster.details() "
                                 "to check if it's ready."], details
    assert queued.get("ok") == [], queued  # admitted, so not queued
    assert down.get("ok") is None and "successfully been deleted" in down["printed"], down
    assert wait_for(lambda: ray_all_gone(stack, ns), 60)

    # Each request the member's SDK sent, once: only reads and the apply and delete of its RayCluster, none
    # refused but its probes of the Gateway API (which the cluster does not serve; the SDK goes on).
    every = calls([made, applied, *followed])
    probes = [c for c in every if c[1].startswith("/apis/gateway.networking.k8s.io/v1/")]
    assert probes and {c[2] for c in probes} <= {403, 404}, probes
    ray, kueue = f"/apis/{RAY}/v1/namespaces/{ns}", f"/apis/{KUEUE}/v1beta1/namespaces/{ns}"
    assert [c for c in every if c not in probes] == sorted([
        ("GET", "/apis/authentication.k8s.io/", 200), ("GET", "/version", 200), ("GET", "/apis", 200),
        ("GET", "/apis/", 200), ("GET", f"/apis/{RAY}/v1", 200),
        ("GET", f"{kueue}/localqueues", 200), ("GET", f"{kueue}/workloads", 200),
        ("GET", f"{ray}/rayclusters", 200), ("PATCH", f"{ray}/rayclusters/{NAME}", 201),
        ("DELETE", f"{ray}/rayclusters/{NAME}", 200),
        ("GET", f"/api/v1/namespaces/{ns}/secrets", 200),
        ("GET", f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses", 200)]), every
