"""The reconciler's writes, through the real client against the API stand-in."""

from __future__ import annotations

import json
from typing import Any

from generator.jobs import connect
from generator.reconciler.decide import decide
from generator.reconciler.model import (
    ANNOTATION_EVIDENCE,
    ANNOTATION_HUMAN,
    ANNOTATION_OWNED,
    ANNOTATION_REASON,
    LABEL_REPAIR,
    TAINT_KEY,
    Breaker,
    Cordon,
    Decision,
    Evidence,
    NodeState,
    NoteHumanRelease,
    Observation,
    Policy,
    Release,
)
from generator.reconciler.nodes import Executor, PoolSelector
from tests.kubeapi import KubeApi

POOLS = [PoolSelector("h100", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})]
XID79 = Evidence("xid-79", "cordon", gpu="3")


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def add_nodes(api: KubeApi, count: int) -> None:
    for i in range(count):
        api.put("", "nodes", None, {"metadata": {"name": f"gpu-{i}", "labels": {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}, "spec": {"taints": [dict(GPU_TAINT)]}})
    api.put("", "nodes", None, {"metadata": {"name": "cpu-0", "labels": {}}, "spec": {}})


def executor(url: str, **kw: Any) -> Executor:
    return Executor(connect(token="admin-token", server=url), clock=lambda: 5000.0, **kw)


def test_read_maps_nodes_to_pools(kube: Any) -> None:
    api, url = kube
    add_nodes(api, 3)
    states = executor(url).read(POOLS)
    assert sorted(states) == ["gpu-0", "gpu-1", "gpu-2"]  # the CPU node is in no GPU pool
    assert states["gpu-0"] == NodeState("gpu-0", "h100")


def test_cordon_release_round_trip(kube: Any) -> None:
    api, url = kube
    add_nodes(api, 4)
    ex = executor(url)
    observations = {f"gpu-{i}": Observation(f"gpu-{i}") for i in (0, 2, 3)}
    observations["gpu-1"] = Observation("gpu-1", (XID79,))
    decision = decide(observations, ex.read(POOLS), Policy(), Breaker(), 5000.0)
    lines = ex.apply(decision)
    assert len(lines) == 2  # the cordon patch and its Event
    node = api.get("", "nodes", None, "gpu-1")
    assert node is not None and node["spec"]["unschedulable"] is True
    assert {"key": TAINT_KEY, "value": "xid-79", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert node["metadata"]["annotations"][ANNOTATION_OWNED] == "true"
    assert node["metadata"]["annotations"][ANNOTATION_REASON] == "xid-79"
    assert json.loads(node["metadata"]["annotations"][ANNOTATION_EVIDENCE]) == [
        {"signal": "xid-79", "gpu": "3", "detail": ""}]
    (event,) = api.list("", "events", "default")
    assert event["involvedObject"] == {"kind": "Node", "name": "gpu-1", "apiVersion": "v1"}
    assert event["reason"] == "GPUHealthCordoned" and event["type"] == "Warning"
    state = ex.read(POOLS)["gpu-1"]
    assert state.owned and state.unschedulable and state.since == 5000.0 and state.history == (5000.0,)
    ex.apply(Decision((Release("gpu-1"),), Breaker()))
    node = api.get("", "nodes", None, "gpu-1")
    assert node is not None and "unschedulable" not in node["spec"]
    assert [t["key"] for t in node["spec"]["taints"]] == ["nvidia.com/gpu"]
    assert ANNOTATION_OWNED not in node["metadata"].get("annotations", {})


def test_foreign_cordons_are_never_lifted(kube: Any) -> None:
    api, url = kube
    add_nodes(api, 1)
    node = api.get("", "nodes", None, "gpu-0")
    assert node is not None
    node["spec"]["unschedulable"] = True
    api.put("", "nodes", None, node)
    assert executor(url).apply(Decision((Release("gpu-0"),), Breaker())) == []
    node = api.get("", "nodes", None, "gpu-0")
    assert node is not None and node["spec"]["unschedulable"] is True


def test_conflict_is_retried_on_the_fresh_node(kube: Any) -> None:
    api, url = kube
    add_nodes(api, 1)
    hits = []

    def someone_labels_the_node(verb: str, path: str) -> None:
        if verb == "PATCH" and not hits:
            hits.append(path)
            node = api.get("", "nodes", None, "gpu-0")
            assert node is not None
            node["metadata"]["labels"]["team"] = "x"
            api.put("", "nodes", None, node)  # bumps resourceVersion under the reconciler

    api.interfere = someone_labels_the_node
    cordon = Cordon("gpu-0", "xid-79", (XID79,), (5000.0,), False)
    assert len(executor(url).apply(Decision((cordon,), Breaker()))) == 1
    patches = [r for r in api.requests if r[0] == "PATCH"]
    assert len(patches) == 2  # 409, then success on the fresh resourceVersion
    node = api.get("", "nodes", None, "gpu-0")
    assert node is not None and node["spec"]["unschedulable"] and node["metadata"]["labels"]["team"] == "x"


def test_conflict_with_a_human_cordon_backs_off(kube: Any) -> None:
    api, url = kube
    add_nodes(api, 1)

    def human_cordons(verb: str, path: str) -> None:
        if verb == "PATCH":
            node = api.get("", "nodes", None, "gpu-0")
            assert node is not None
            if not node["spec"].get("unschedulable"):
                node["spec"]["unschedulable"] = True
                api.put("", "nodes", None, node)

    api.interfere = human_cordons
    cordon = Cordon("gpu-0", "xid-79", (XID79,), (5000.0,), False)
    assert executor(url).apply(Decision((cordon,), Breaker())) == []
    node = api.get("", "nodes", None, "gpu-0")
    assert node is not None and ANNOTATION_OWNED not in (node["metadata"].get("annotations") or {})


def test_human_release_drops_our_taint_and_is_remembered(kube: Any) -> None:
    api, url = kube
    add_nodes(api, 1)
    ex = executor(url)
    ex.apply(Decision((Cordon("gpu-0", "xid-79", (XID79,), (5000.0,), True),), Breaker()))
    node = api.get("", "nodes", None, "gpu-0")
    assert node is not None and node["metadata"]["labels"][LABEL_REPAIR] == "true"
    node["spec"]["unschedulable"] = False  # kubectl uncordon
    api.put("", "nodes", None, node)
    ex.apply(Decision((NoteHumanRelease("gpu-0", "xid-79"),), Breaker()))
    node = api.get("", "nodes", None, "gpu-0")
    assert node is not None and TAINT_KEY not in [t["key"] for t in node["spec"]["taints"]]
    assert node["metadata"]["annotations"][ANNOTATION_HUMAN] == "xid-79"
    assert ex.read(POOLS)["gpu-0"].human_released == "xid-79"


def test_dry_run_writes_nothing(kube: Any) -> None:
    api, url = kube
    add_nodes(api, 1)
    lines = executor(url, dry_run=True).apply(Decision((Cordon("gpu-0", "xid-79", (XID79,), (5000.0,), False),),
                                                       Breaker()))
    assert len(lines) == 1 and json.loads(lines[0])["dryRun"] is True
    assert not [r for r in api.requests if r[0] in ("PATCH", "POST", "PUT", "DELETE")]
