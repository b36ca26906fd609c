"""The reconciler's writes on the real API server, made as the rendered ServiceAccount (real RBAC)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from generator.jobs import connect
from generator.reconciler.decide import decide
from generator.reconciler.model import (
    ANNOTATION_EVIDENCE,
    ANNOTATION_HUMAN,
    ANNOTATION_OWNED,
    ANNOTATION_REASON,
    CONDITION_TYPE,
    LABEL_REPAIR,
    TAINT_KEY,
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
from tests.upstream.cluster import Stack
from tests.upstream.reconciler_env import (
    NAMESPACE,
    SERVICE_ACCOUNT,
    Pool,
    audit_writes,
    credential_id,
    interference,
    reconciler_api,
    reconciler_identity,
)

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
    decision = decide(observations, ex.read(pool.selector), Policy(), {}, 5000.0)
    lines = [line for line in ex.apply(decision) if '"SetCondition"' not in line]
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
    ex.apply(Decision(tuple(a for a in decision.actions if isinstance(a, Event)), {}))
    (again,) = pool.events(n(1))
    assert again["metadata"]["name"] == event["metadata"]["name"] and again["count"] == 2
    state = ex.read(pool.selector)[n(1)]
    assert state.owned and state.unschedulable and state.since == 5000.0 and state.history == (5000.0,)
    ex.apply(Decision((Release(n(1)),), {}))
    node = pool.get(n(1))
    assert not node["spec"].get("unschedulable")
    assert [t["key"] for t in node["spec"]["taints"]] == ["nvidia.com/gpu"]
    assert ANNOTATION_OWNED not in (node["metadata"].get("annotations") or {})


def test_foreign_cordons_are_never_lifted(pool: Pool) -> None:
    pool.add(1)
    pool.update(pool.name(0), lambda node: node["spec"].update(unschedulable=True))
    assert executor(pool).apply(Decision((Release(pool.name(0)),), {})) == []
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
        assert len(ex.apply(Decision((cordon,), {}))) == 1
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
        assert executor(pool).apply(Decision((cordon,), {})) == []
    assert ANNOTATION_OWNED not in (pool.get(name)["metadata"].get("annotations") or {})


def test_human_release_drops_our_taint_and_is_remembered(pool: Pool) -> None:
    pool.add(1)
    name = pool.name(0)
    ex = executor(pool)
    ex.apply(Decision((Cordon(name, "xid-79", (XID79,), (5000.0,), True),), {}))
    assert pool.get(name)["metadata"]["labels"][LABEL_REPAIR] == "true"
    pool.update(name, lambda node: node["spec"].update(unschedulable=False))  # kubectl uncordon
    ex.apply(Decision((NoteHumanRelease(name, "xid-79"),), {}))
    node = pool.get(name)
    assert TAINT_KEY not in [t["key"] for t in node["spec"]["taints"]]
    assert node["metadata"]["annotations"][ANNOTATION_HUMAN] == "xid-79"
    assert ex.read(pool.selector)[name].human_released == "xid-79"


def test_dry_run_writes_nothing(pool: Pool) -> None:
    pool.add(1)
    name = pool.name(0)
    before = len(audit_writes(pool.stack, SA_USER, ("nodes", "events", "leases", "configmaps")))
    lines = executor(pool, dry_run=True).apply(Decision((Cordon(name, "xid-79", (XID79,), (5000.0,), False),),
                                                        {}))
    assert len(lines) == 1 and json.loads(lines[0])["dryRun"] is True
    assert len(audit_writes(pool.stack, SA_USER, ("nodes", "events", "leases", "configmaps"))) == before
    assert not pool.get(name)["spec"].get("unschedulable")


def test_a_long_reason_makes_a_valid_taint(pool: Pool) -> None:
    """Issue 13: the reason cut at 63 characters ended in '-' and the API server answered 422."""
    from generator.reconciler.nodes import taint_value

    pool.add(1)
    name = pool.name(0)
    signals = ["ecc_dbe", "gpus_missing", "health_fail", "row_remap_failure", "thermal", "xid-48", "xid-79"]
    reason = ",".join(signals)
    assert reason.replace(",", ".")[:63].endswith("-")  # what the old code sent
    evidence = tuple(Evidence(s, "cordon", gpu="0") for s in signals)
    ex = executor(pool)
    lines = ex.apply(Decision((Cordon(name, reason, evidence, (5000.0,), False),), {}))
    assert len(lines) == 1 and ex.failures == 0
    node = pool.get(name)
    assert {"key": TAINT_KEY, "value": taint_value(reason), "effect": "NoSchedule"} in node["spec"]["taints"]
    assert node["metadata"]["annotations"][ANNOTATION_REASON] == reason  # the whole reason is kept


CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


def test_nodes_are_listed_in_pages(pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The node list is read a page at a time (limit + continue), so 10k Nodes are never all in memory."""
    import generator.reconciler.nodes as nodes_module

    monkeypatch.setattr(nodes_module, "PAGE", 2)
    pool.add(5)
    who = reconciler_identity(pool.stack)
    ex = Executor(connect(kubeconfig=str(who.kubeconfig)))
    states = ex.read(pool.selector)
    assert sorted(states) == [pool.name(i) for i in range(5)]
    mine = credential_id(who)
    lists = [e["requestURI"] for e in pool.stack.audit() if e.get("verb") == "list"
             and (e.get("objectRef") or {}).get("resource") == "nodes"
             and mine in ((e.get("user") or {}).get("extra") or {}).get(CREDENTIAL_ID, [])]
    # Every node of the stack (other tests' too) in pages of 2: the first without, the rest with a continue token.
    assert len(lists) >= 3 and all("limit=2" in uri for uri in lists)
    assert "continue=" not in lists[0] and all("continue=" in uri for uri in lists[1:])


@pytest.mark.parametrize("verb,resource,namespace,name,allowed", [
    ("patch", "nodes", "", "any-node", True),
    ("patch", "nodes/status", "", "any-node", True),     # the GPUHealthy condition
    ("update", "nodes/status", "", "any-node", False),   # never the kubelet's whole status
    ("create", "events", "default", "", True),           # Events about Nodes must be in default
    ("patch", "events", "default", "gpu-1.abc", True),   # a repeated warning updates its Event's count
    ("create", "events", NAMESPACE, "", False),          # issue 13: Events were allowed in every namespace
    ("create", "events", "team-a", "", False),
    ("update", "leases", NAMESPACE, "fleetgen-health", True),
    ("update", "leases", NAMESPACE, "someone-elses-lease", False),
    ("create", "leases", NAMESPACE, "", True),           # RBAC cannot name what is created
    ("patch", "configmaps", NAMESPACE, "fleetgen-health-breaker", True),
    ("patch", "configmaps", NAMESPACE, "fleetgen-health", False),  # its own policy: only mounted
    ("get", "configmaps", NAMESPACE, "fleetgen-health", False),
    ("delete", "configmaps", NAMESPACE, "fleetgen-health-breaker", False),
    ("patch", "configmaps", "kube-system", "fleetgen-health-breaker", False),
])
def test_rendered_rbac_on_the_real_authorizer(pool: Pool, verb: str, resource: str, namespace: str, name: str,
                                              allowed: bool) -> None:
    from kubernetes import client

    api = reconciler_api(pool.stack)
    group = "coordination.k8s.io" if resource == "leases" else ""
    resource, _, subresource = resource.partition("/")
    review = client.AuthorizationV1Api(api.client).create_self_subject_access_review({
        "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                        "subresource": subresource, "namespace": namespace, "name": name}}})
    assert review.status.allowed is allowed, (verb, resource, namespace, name, review.status.reason)


def test_a_reset_class_cordon_waits_for_a_new_boot_id(pool: Pool) -> None:
    """The cordon records the Node's bootID; quiet metrics do not lift an XID 154 cordon, a reboot
    (the kubelet reports a new bootID) does."""
    from kubernetes import client

    from generator.reconciler.model import ANNOTATION_BOOT

    pool.add(2)
    name = pool.name(0)
    admin = client.CoreV1Api(pool.stack.client())

    def boot(boot_id: str) -> None:
        admin.patch_node_status(name, {"status": {"nodeInfo": {"bootID": boot_id}}})

    boot("boot-1")
    ex = executor(pool)
    policy = Policy(healthy_checks_to_release=1, cooldown_seconds=0)
    xid154 = Evidence("xid-154", "cordon", gpu="2")
    ex.apply(decide({name: Observation(name, (xid154,)), pool.name(1): Observation(pool.name(1))},
                    ex.read(pool.selector), policy, {}, 5000.0))
    assert pool.get(name)["metadata"]["annotations"][ANNOTATION_BOOT] == "boot-1"
    quiet = {n: Observation(n) for n in (name, pool.name(1))}
    waiting = decide(quiet, ex.read(pool.selector), policy, {}, 6000.0)
    assert not [a for a in waiting.actions if isinstance(a, Release)]
    boot("boot-2")
    state = ex.read(pool.selector)[name]
    assert state.boot_id == "boot-2" and state.cordon_boot_id == "boot-1"
    ex.apply(decide(quiet, ex.read(pool.selector), policy, {}, 6000.0))
    node = pool.get(name)
    assert not node["spec"].get("unschedulable") and ANNOTATION_BOOT not in node["metadata"].get("annotations", {})


def test_the_gpu_healthy_condition_on_the_real_api_server(pool: Pool) -> None:
    """The condition is merged by type beside the kubelet's (strategic merge on nodes/status, as
    the rendered ServiceAccount), written once per change, and its transition time moves only
    when its status does."""
    from kubernetes import client

    pool.add(2)
    name = pool.name(0)
    admin = client.CoreV1Api(pool.stack.client())
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastHeartbeatTime": "2026-11-23T00:00:00Z", "lastTransitionTime": "2026-11-23T00:00:00Z"}
    admin.patch_node_status(name, {"status": {"conditions": [ready]}})
    clock = [5000.0]
    ex = Executor(reconciler_api(pool.stack), clock=lambda: clock[0])
    policy = Policy(max_unhealthy_percent=100)

    def loop(observations: dict[str, Observation]) -> list[str]:
        decision = decide(observations, ex.read(pool.selector), policy, {}, clock[0])
        return [line for line in ex.apply(decision) if '"SetCondition"' in line]

    def ours() -> dict[str, Any]:
        (mine,) = [c for c in pool.get(name)["status"]["conditions"] if c["type"] == CONDITION_TYPE]
        return mine

    quiet = {n: Observation(n, gpus_reporting=8) for n in (name, pool.name(1))}
    assert len(loop(quiet)) == 2
    first = ours()
    assert (first["status"], first["reason"], first["message"]) == ("True", "GPUsHealthy",
                                                                      "8 GPUs report, no fault signal")
    assert [c for c in pool.get(name)["status"]["conditions"] if c["type"] == "Ready"][0]["reason"] == "KubeletReady"
    clock[0] += 30
    assert loop(quiet) == []  # nothing changed: nothing written
    clock[0] += 30
    assert len(loop({**quiet, name: Observation(name, (Evidence("uncorrectable_remapped_rows", "count", "1"),))})) == 1
    warned = ours()  # still True: the transition time stays, the reason moves
    assert warned["reason"] == "GPUWarnings" and warned["lastTransitionTime"] == first["lastTransitionTime"]
    clock[0] += 30
    loop({**quiet, name: Observation(name, (XID79,))})
    faulty = ours()
    assert (faulty["status"], faulty["reason"]) == ("False", "GPUFault")
    assert faulty["lastTransitionTime"] != first["lastTransitionTime"]
    assert pool.get(name)["spec"]["unschedulable"] is True
    writes = [e for e in audit_writes(pool.stack, SA_USER, ("nodes",)) if e["objectRef"].get("subresource") == "status"
              and e["objectRef"].get("name") in (name, pool.name(1))]
    assert {e["verb"] for e in writes} == {"patch"} and len(writes) == 4
