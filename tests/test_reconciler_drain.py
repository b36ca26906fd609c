"""Optional drain of cordoned nodes (issue 13): the decision and its own breaker, then real
evictions on the real API server, as prod-west's rendered ServiceAccount (drain enabled there)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from typing import Any

import pytest

from generator.reconciler.decide import decide
from generator.reconciler.model import (
    ANNOTATION_DRAINED,
    DRAIN,
    Breaker,
    Cordon,
    Drain,
    Evidence,
    NodeState,
    Observation,
    Policy,
    Release,
)
from generator.reconciler.nodes import Executor
from tests.upstream.cluster import Stack
from tests.upstream.processes import wait_for
from tests.upstream.reconciler_env import Pool, reconciler_api

NOW = 1_000_000.0
DRAINING = Policy(drain=True, drain_max_percent=20, max_unhealthy_percent=50, cooldown_seconds=0,
                  healthy_checks_to_release=1)
XID79 = Evidence("xid-79", "cordon", gpu="0")


def held(name: str, **kw: Any) -> NodeState:
    return NodeState(name, "h100", unschedulable=True, owned=True, **{"reason": "xid-79", "since": 0.0, **kw})


def pool_of(n: int) -> dict[str, NodeState]:
    return {f"n{i}": NodeState(f"n{i}", "h100") for i in range(n)}


def drains(decision: Any) -> list[str]:
    return [a.node for a in decision.actions if isinstance(a, Drain)]


def test_drain_follows_our_cordons_only_when_enabled() -> None:
    nodes = {**pool_of(10), "n1": held("n1"), "n2": held("n2", drained=True),
             "n3": NodeState("n3", "h100", unschedulable=True)}  # someone else's cordon: not ours to drain
    obs = {name: Observation(name, unknown_signals=("exporter",)) for name in nodes}
    obs["n4"] = Observation("n4", (XID79,))
    decision = decide(obs, nodes, DRAINING, {}, NOW)
    assert [a.node for a in decision.actions if isinstance(a, Cordon)] == ["n4"]
    assert drains(decision) == ["n1", "n4"]  # held and just cordoned; n2 is done
    # The cordon comes before its drain (a failed cordon skips the drain: same node).
    kinds = [type(a).__name__ for a in decision.actions if a.node == "n4"]
    assert kinds.index("Cordon") < kinds.index("Drain")
    assert drains(decide(obs, nodes, replace(DRAINING, drain=False), {}, NOW)) == []


def test_a_released_node_is_not_drained() -> None:
    nodes = {**pool_of(4), "n1": held("n1", reason="health_fail", healthy_checks=1)}
    decision = decide({n: Observation(n) for n in nodes}, nodes, DRAINING, {}, NOW)
    assert [a.node for a in decision.actions if isinstance(a, Release)] == ["n1"] and drains(decision) == []


def test_the_drain_breaker_trips_on_its_own_and_holds() -> None:
    """20% of 10 nodes: two may drain at once. Three waiting trips the pool's drain breaker;
    cordons go on (the cordon breaker is another one) and nothing is evicted until a reset."""
    nodes = {**pool_of(10), "n1": held("n1"), "n2": held("n2")}
    obs = {name: Observation(name) for name in nodes}
    assert drains(decide(obs, nodes, DRAINING, {}, NOW)) == ["n1", "n2"]
    obs["n3"] = Observation("n3", (XID79,))
    tripped = decide(obs, nodes, DRAINING, {}, NOW)
    assert [a.node for a in tripped.actions if isinstance(a, Cordon)] == ["n3"] and drains(tripped) == []
    assert tripped.breakers[DRAIN + "h100"].tripped and "h100" not in tripped.breakers
    assert any(line.startswith("drain breaker trips: pool h100: 3 of 10 nodes") for line in tripped.skipped)
    calm = {**nodes, "n2": held("n2", drained=True)}
    still = decide({n: Observation(n) for n in calm}, calm, DRAINING, tripped.breakers, NOW + 30)
    assert drains(still) == [] and still.breakers[DRAIN + "h100"].tripped
    assert drains(decide({n: Observation(n) for n in calm}, calm, DRAINING,
                         {"h100": Breaker(True, "cordons", NOW)}, NOW)) == ["n1"]  # the cordon breaker is not it


# --- real evictions --------------------------------------------------------------------------


def _core(stack: Stack) -> Any:
    from kubernetes import client

    return client.CoreV1Api(stack.client())


def _pod(name: str, node: str, labels: dict[str, str] | None = None,
         owner: dict[str, Any] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}, "annotations": annotations or {}}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}],
                     "tolerations": [{"operator": "Exists"}]}}


def _ready(stack: Stack, namespace: str, name: str) -> None:
    """What the kubelet would report: Running and Ready (the disruption controller counts Ready pods)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _core(stack).patch_namespaced_pod_status(name, namespace, {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": now}]}})


def _names(stack: Stack, namespace: str, node: str) -> dict[str, bool]:
    """Pods on the node -> whether they are being deleted."""
    pods = _core(stack).list_namespaced_pod(namespace, field_selector=f"spec.nodeName={node}").items
    return {p.metadata.name: p.metadata.deletion_timestamp is not None for p in pods}


def test_evictions_honour_budgets_and_spare_daemonset_and_static_pods(kube_stack: Stack) -> None:
    """On the session's stack, whose controller manager runs the disruption controller, so the
    budget has a real status and the eviction API enforces it."""
    from kubernetes import client

    stack = kube_stack
    pool = Pool(stack)
    pool.add(2)
    node = pool.name(0)
    namespace = f"train-{uuid.uuid4().hex[:6]}"
    core = _core(stack)
    core.create_namespace({"metadata": {"name": namespace}})
    assert wait_for(lambda: bool(core.list_namespaced_service_account(namespace).items), 30), "no default SA"
    apps = client.AppsV1Api(stack.client())
    ds = apps.create_namespaced_daemon_set(namespace, {
        "metadata": {"name": "agent"}, "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": ds.metadata.uid,
             "controller": True}
    for body in (_pod("trainer", node), _pod("server", node, {"app": "server"}), _pod("agent-x", node, owner=owner),
                 _pod("static", node, annotations={"kubernetes.io/config.mirror": "abc"}),
                 _pod("elsewhere", pool.name(1))):
        core.create_namespaced_pod(namespace, body)
        _ready(stack, namespace, body["metadata"]["name"])
    client.PolicyV1Api(stack.client()).create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "server"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "server"}}}})
    budget = client.PolicyV1Api(stack.client())
    assert wait_for(lambda: (budget.read_namespaced_pod_disruption_budget("server", namespace).status
                             .current_healthy or 0) == 1, 30), "the disruption controller never counted the pod"

    ex = Executor(reconciler_api(stack, "prod-west"), clock=lambda: NOW)
    quiet = {pool.name(1): Observation(pool.name(1))}
    first = decide({**quiet, node: Observation(node, (XID79,))}, ex.read(pool.selector),
                   replace(DRAINING, drain_max_percent=50), {}, NOW)
    lines = ex.apply(first)
    (drain,) = [json.loads(line) for line in lines if '"Drain"' in line]
    assert drain["evicted"] == [f"{namespace}/trainer"] and drain["blocked"] == [f"{namespace}/server"]
    on_node = _names(stack, namespace, node)
    assert on_node["trainer"] is True  # evicted: deleting (no kubelet here to finish it)
    assert on_node["server"] is False and on_node["agent-x"] is False and on_node["static"] is False
    assert _names(stack, namespace, pool.name(1)) == {"elsewhere": False}
    assert ANNOTATION_DRAINED not in (pool.get(node)["metadata"].get("annotations") or {})
    assert [e["reason"] for e in pool.events(node) if e["reason"].startswith("GPUHealthDrain")] == [
        "GPUHealthDrainBlocked"]
    # The budget is lifted: the next loop evicts the server, the one after finds nothing left.
    budget.delete_namespaced_pod_disruption_budget("server", namespace)
    for _ in range(2):
        ex.apply(decide(quiet, ex.read(pool.selector), replace(DRAINING, drain_max_percent=50), {}, NOW + 30))
    assert _names(stack, namespace, node)["server"] is True
    assert pool.get(node)["metadata"]["annotations"][ANNOTATION_DRAINED] == "true"
    assert "GPUHealthDrained" in [e["reason"] for e in pool.events(node)]
    assert ex.read(pool.selector)[node].drained
    # Drained: no more pod lists for this node.
    assert not drains(decide(quiet, ex.read(pool.selector), replace(DRAINING, drain_max_percent=50), {}, NOW + 60))


@pytest.mark.parametrize(("cluster", "allowed"), [("prod-east", False), ("prod-west", True)])
def test_evictions_are_allowed_only_where_drain_is_declared(kube_stack: Stack, cluster: str, allowed: bool) -> None:
    from kubernetes import client

    api = reconciler_api(kube_stack, cluster)
    try:
        for resource, sub, verb in (("pods", "eviction", "create"), ("pods", "", "list")):
            review = client.AuthorizationV1Api(api.client).create_self_subject_access_review({"spec": {
                "resourceAttributes": {"verb": verb, "resource": resource, "subresource": sub,
                                       "namespace": "team-a"}}})
            assert review.status.allowed is allowed, (cluster, resource, sub)
    finally:
        reconciler_api(kube_stack)  # back to prod-east's role for the other tests


def test_reset_breaker_resets_the_drain_or_the_cordon_breakers_not_both() -> None:
    from generator.reconciler.loop import Reconciler

    class Store:
        def __init__(self) -> None:
            self.state = {"h100": Breaker(True, "cordons"), DRAIN + "h100": Breaker(True, "drains"),
                          DRAIN + "a100": Breaker(True, "drains")}

        def load(self) -> dict[str, Breaker]:
            return dict(self.state)

        def save(self, breakers: dict[str, Breaker]) -> None:
            self.state = dict(breakers)

    store = Store()
    rec = Reconciler(None, [], [], DRAINING, store)  # type: ignore[arg-type]
    assert sorted(rec.reset_breaker("h100", drain=True)) == [DRAIN + "h100"]
    assert sorted(store.state) == [DRAIN + "a100", "h100"]
    assert sorted(rec.reset_breaker(None)) == ["h100"] and sorted(store.state) == [DRAIN + "a100"]
    assert sorted(rec.reset_breaker(None, drain=True)) == [DRAIN + "a100"] and store.state == {}
