"""The reconciler's writes on the real API server, made as the rendered ServiceAccount (real RBAC)."""

from __future__ import annotations

import json
from typing import Any

import pytest

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
    Event,
    Evidence,
    NodeState,
    NoteHumanRelease,
    Observation,
    Policy,
    Release,
)
from generator.reconciler.nodes import Executor
from tests.reconciler_env import NAMESPACE, SERVICE_ACCOUNT, Pool, audit_writes, interference, reconciler_api
from tests.upstream.cluster import Stack

XID79 = Evidence("xid-79", "cordon", gpu="3")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
SA_USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


@pytest.fixture
def pool(kube_stack: Stack) -> Pool:
    return Pool(kube_stack)


def executor(pool: Pool, **kw: Any) -> Executor:
    return Executor(reconciler_api(pool.stack), clock=lambda: 5000.0, **kw)


def test_read_maps_nodes_to_pools(pool: Pool) -> None:
    pool.add(3, cpu_node=True)
    states = executor(pool).read(pool.selector)
    assert sorted(states) == [pool.name(i) for i in range(3)]  # the CPU node is in no GPU pool
    assert states[pool.name(0)] == NodeState(pool.name(0), "h100")


def test_cordon_release_round_trip(pool: Pool) -> None:
    pool.add(4)
    ex = executor(pool)
    n = pool.name
    observations = {n(i): Observation(n(i)) for i in (0, 2, 3)}
    observations[n(1)] = Observation(n(1), (XID79,))
    decision = decide(observations, ex.read(pool.selector), Policy(), Breaker(), 5000.0)
    lines = ex.apply(decision)
    assert len(lines) == 2  # the cordon patch and its Event
    node = pool.get(n(1))
    assert node["spec"]["unschedulable"] is True
    assert {"key": TAINT_KEY, "value": "xid-79", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert GPU_TAINT in node["spec"]["taints"]
    assert node["metadata"]["annotations"][ANNOTATION_OWNED] == "true"
    assert node["metadata"]["annotations"][ANNOTATION_REASON] == "xid-79"
    assert json.loads(node["metadata"]["annotations"][ANNOTATION_EVIDENCE]) == [
        {"signal": "xid-79", "gpu": "3", "detail": ""}]
    (event,) = pool.events(n(1))
    assert event["involvedObject"]["kind"] == "Node" and event["involvedObject"]["name"] == n(1)
    # The uid is what `kubectl describe node` selects on (issue 13: it was missing).
    assert event["involvedObject"]["uid"] == node["metadata"]["uid"]
    assert event["reason"] == "GPUHealthCordoned" and event["type"] == "Warning"
    # The same warning again (the next loop): one Event, counted, not a second Event.
    ex.apply(Decision(tuple(a for a in decision.actions if isinstance(a, Event)), Breaker()))
    (again,) = pool.events(n(1))
    assert again["metadata"]["name"] == event["metadata"]["name"] and again["count"] == 2
    state = ex.read(pool.selector)[n(1)]
    assert state.owned and state.unschedulable and state.since == 5000.0 and state.history == (5000.0,)
    ex.apply(Decision((Release(n(1)),), Breaker()))
    node = pool.get(n(1))
    assert not node["spec"].get("unschedulable")
    assert [t["key"] for t in node["spec"]["taints"]] == ["nvidia.com/gpu"]
    assert ANNOTATION_OWNED not in (node["metadata"].get("annotations") or {})


def test_foreign_cordons_are_never_lifted(pool: Pool) -> None:
    pool.add(1)
    pool.update(pool.name(0), lambda node: node["spec"].update(unschedulable=True))
    assert executor(pool).apply(Decision((Release(pool.name(0)),), Breaker())) == []
    assert pool.get(pool.name(0))["spec"]["unschedulable"] is True


def test_conflict_is_retried_on_the_fresh_node(pool: Pool) -> None:
    """Someone edits the Node between the reconciler's read and its patch: the server answers 409."""
    pool.add(1)
    name = pool.name(0)
    ex = executor(pool)

    def someone_labels_the_node(node: str) -> None:
        if not pool.get(node)["metadata"]["labels"].get("team"):
            pool.update(node, lambda body: body["metadata"]["labels"].update(team="x"))

    cordon = Cordon(name, "xid-79", (XID79,), (5000.0,), False)
    with interference(someone_labels_the_node):
        assert len(ex.apply(Decision((cordon,), Breaker()))) == 1
    patches = [e for e in audit_writes(pool.stack, SA_USER, ("nodes",))
               if e["verb"] == "patch" and e["objectRef"]["name"] == name]
    assert [e["responseStatus"]["code"] for e in patches] == [409, 200]  # stale resourceVersion, then fresh
    node = pool.get(name)
    assert node["spec"]["unschedulable"] and node["metadata"]["labels"]["team"] == "x"


def test_conflict_with_a_human_cordon_backs_off(pool: Pool) -> None:
    pool.add(1)
    name = pool.name(0)

    def human_cordons(node: str) -> None:
        if not pool.get(node)["spec"].get("unschedulable"):
            pool.update(node, lambda body: body["spec"].update(unschedulable=True))

    cordon = Cordon(name, "xid-79", (XID79,), (5000.0,), False)
    with interference(human_cordons):
        assert executor(pool).apply(Decision((cordon,), Breaker())) == []
    assert ANNOTATION_OWNED not in (pool.get(name)["metadata"].get("annotations") or {})


def test_human_release_drops_our_taint_and_is_remembered(pool: Pool) -> None:
    pool.add(1)
    name = pool.name(0)
    ex = executor(pool)
    ex.apply(Decision((Cordon(name, "xid-79", (XID79,), (5000.0,), True),), Breaker()))
    assert pool.get(name)["metadata"]["labels"][LABEL_REPAIR] == "true"
    pool.update(name, lambda node: node["spec"].update(unschedulable=False))  # kubectl uncordon
    ex.apply(Decision((NoteHumanRelease(name, "xid-79"),), Breaker()))
    node = pool.get(name)
    assert TAINT_KEY not in [t["key"] for t in node["spec"]["taints"]]
    assert node["metadata"]["annotations"][ANNOTATION_HUMAN] == "xid-79"
    assert ex.read(pool.selector)[name].human_released == "xid-79"


def test_dry_run_writes_nothing(pool: Pool) -> None:
    pool.add(1)
    name = pool.name(0)
    before = len(audit_writes(pool.stack, SA_USER, ("nodes", "events", "leases", "configmaps")))
    lines = executor(pool, dry_run=True).apply(Decision((Cordon(name, "xid-79", (XID79,), (5000.0,), False),),
                                                        Breaker()))
    assert len(lines) == 1 and json.loads(lines[0])["dryRun"] is True
    assert len(audit_writes(pool.stack, SA_USER, ("nodes", "events", "leases", "configmaps"))) == before
    assert not pool.get(name)["spec"].get("unschedulable")
