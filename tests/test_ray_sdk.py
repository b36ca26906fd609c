"""Issue 32, the Ray API's configuration: refused in Python terms before anything is sent, and the
RayCluster it makes is one Kueue queues (fixed-size groups, the queue label). The cluster's side:
tests/test_ray.py."""

from __future__ import annotations

import pytest

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

    api = SimpleNamespace(configuration=SimpleNamespace(host="https://api.fleet.internal:6443/"))
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
