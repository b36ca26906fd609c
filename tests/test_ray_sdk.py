"""Issue 32, the Ray API's configuration: refused in Python terms before anything is sent, and the
RayCluster it makes is one Kueue queues (fixed-size groups, the queue label). The cluster's side:
tests/test_ray.py."""

from __future__ import annotations

import pytest

from generator.connection import Connection
from generator.jobs.ray import ClusterConfiguration, ConfigurationError

BASE = {"name": "tune", "namespace": "ml-research", "queue": "ml-research", "image": "rayproject/ray:2.52.0"}


@pytest.mark.parametrize(("change", "said"), [
    ({"name": "x" * 54}, "at most 53 characters"),
    ({"name": "9lives"}, "DNS-1035"),
    ({"namespace": "ML"}, "namespace='ML'"),
    ({"workers": 0}, "workers=0 must be at least 1"),
    ({"worker_gpus": -1}, "worker_gpus=-1"),
    ({"worker_memory": "lots"}, "worker_memory='lots' is not a Kubernetes quantity"),
    ({"head_cpus": "0"}, "head_cpus='0' must be more than 0"),
    ({"image": "ray project"}, "image='ray project'"),
])
def test_a_bad_configuration_is_refused_in_python_terms(change: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigurationError, match="ClusterConfiguration: .*" + said.replace("(", r"\(")):
        ClusterConfiguration(**{**BASE, **change})  # type: ignore[arg-type]


def test_the_ray_cluster_is_fixed_size_and_on_the_queue() -> None:
    body = ClusterConfiguration(**BASE, workers=3, worker_gpus=8, priority="standard").body()
    labels = body["metadata"]["labels"]
    assert labels == {"kueue.x-k8s.io/queue-name": "ml-research", "kueue.x-k8s.io/priority-class": "standard"}
    (group,) = body["spec"]["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 3
    assert "enableInTreeAutoscaling" not in body["spec"]  # Kueue refuses autoscaling RayClusters
    resources = group["template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] and resources["limits"]["nvidia.com/gpu"] == "8"
    head = body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "nvidia.com/gpu" not in head


def test_details_of_an_odd_answer_are_partial_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """An API server's answer is hostile until checked: missing templates, a null head, counts as strings."""
    from types import SimpleNamespace

    from generator.jobs.ray import RayCluster, RayClusterStatus

    api = Connection(SimpleNamespace(configuration=SimpleNamespace(host="https://api.fleet.internal:6443/")))
    odd = {"spec": {"workerGroupSpecs": [{"replicas": "2", "template": None}, "junk",
                                         {"replicas": 1, "template": {"spec": {"containers": [
                                             {"resources": {"limits": {"nvidia.com/gpu": "eight"}}},
                                             {"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}]},
           "status": {"head": None}}
    monkeypatch.setattr(RayCluster, "_get", lambda self: odd)
    monkeypatch.setattr(RayCluster, "status", lambda self: RayClusterStatus(self.name, "pending"))
    details = RayCluster.on_cluster(api, "tune", "ml-research").details()
    assert (details.head_service, details.workers, details.worker_gpus) == ("tune-head-svc", 3, 4)
    assert details.dashboard_via_api == ("https://api.fleet.internal:6443/api/v1/namespaces/ml-research/services/"
                                         "tune-head-svc:dashboard/proxy/")


def test_logs_number_the_head_then_the_workers_and_skip_odd_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 is the head, then workers in name order, each read from its first (Ray) container; pods
    without a spec or of another node type are not numbered."""
    from types import SimpleNamespace

    from kubernetes import client

    from generator.errors import UsageError
    from generator.jobs import pods
    from generator.jobs.ray import RayCluster

    def pod(name: str, kind: str | None, container: str | None = "ray") -> SimpleNamespace:
        spec = None if container is None else SimpleNamespace(containers=[SimpleNamespace(name=container)])
        return SimpleNamespace(metadata=SimpleNamespace(name=name, labels={"ray.io/node-type": kind} if kind else None),
                               spec=spec)
    listed = [pod("tune-gpu-b", "worker"), pod("tune-head", "head", "ray-head"), pod("tune-gpu-a", "worker"),
              pod("tune-cleanup", "redis-cleanup"), pod("stray", None), pod("tune-gpu-0", "worker", None)]
    monkeypatch.setattr(client.CoreV1Api, "list_namespaced_pod",
                        lambda self, *a, **k: SimpleNamespace(items=listed))
    monkeypatch.setattr(RayCluster, "_get", lambda self: {})
    read: list[tuple[str, str]] = []
    monkeypatch.setattr(pods, "log_lines", lambda api, ns, name, container, follow: iter([read.append(
        (name, container)) or f"{name} says hi"]))
    cluster = RayCluster.on_cluster(Connection(SimpleNamespace(configuration=SimpleNamespace(host="https://x"))),
                                    "tune", "ml")
    assert [next(cluster.logs(rank=r)) for r in range(3)] == ["tune-head says hi", "tune-gpu-a says hi",
                                                                 "tune-gpu-b says hi"]
    assert read == [("tune-head", "ray-head"), ("tune-gpu-a", "ray"), ("tune-gpu-b", "ray")]
    with pytest.raises(UsageError, match=r"no rank 3 in Ray cluster tune: it has 3 pods now \(0 is the head\)"):
        next(cluster.logs(rank=3))
    listed.clear()
    with pytest.raises(UsageError, match=r"it has no pods yet \(is it admitted\? see status\(\)\)"):
        next(cluster.logs())
