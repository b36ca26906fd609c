"""Faults a real API server cannot be made to produce on demand (429, 500, no answer), injected by
tests/faultproxy.py in front of the real one: the CLI exits 2 with a sentence, the reconciler
writes nothing it is not sure of and recovers on the next loop."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from generator.jobs import connect
from generator.reconciler.decide import decide
from generator.reconciler.informer import NodeCache
from generator.reconciler.lease import BreakerStore, LeaderLease
from generator.reconciler.loop import Reconciler
from generator.reconciler.model import ANNOTATION_OWNED, Policy
from generator.reconciler.nodes import Executor
from tests.conftest import REPO, run
from tests.faultproxy import HANG, FaultProxy
from tests.reconciler_env import (
    NAMESPACE,
    Faulty,
    Pool,
    credential_id,
    misshapen,
    reconciler_identity,
    reset_leadership,
    token_of,
    watch_for,
    writers,
)
from tests.upstream.cluster import Stack
from tests.upstream.fleet import apply, kustomize_build
from tests.upstream.processes import wait_for

TEAM_NS = "faults-team"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


@pytest.fixture
def proxy(kube_stack: Stack) -> Iterator[FaultProxy]:
    front = FaultProxy(kube_stack.server, kube_stack.workdir / "ca.crt")
    front.serve()
    yield front
    front.shutdown()


@pytest.fixture(scope="module")
def member_token(kube_stack: Stack) -> str:
    """A token with the rendered team-member rights in a namespace of its own."""
    from kubernetes import client

    for obj in kustomize_build(REPO / "rendered/prod-west/teams"):
        if obj["kind"] == "ClusterRole":
            apply(kube_stack, obj)
    api = kube_stack.client()
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": TEAM_NS}})
    core.create_namespaced_service_account(TEAM_NS, {"metadata": {"name": "member"}})
    client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(TEAM_NS, {
        "metadata": {"name": "member-jobs"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "fleetgen-team-member"},
        "subjects": [{"kind": "ServiceAccount", "name": "member", "namespace": TEAM_NS}]})
    return token_of(kube_stack.token_identity(TEAM_NS, "member"))


def job(proxy: FaultProxy, token: str, *args: str) -> Any:
    return run(REPO, "job", *args, "--namespace", TEAM_NS, "--server", proxy.url, "--token", token)


def test_job_status_through_the_front_reaches_the_real_server(proxy: FaultProxy, member_token: str) -> None:
    """Without a fault the front is transparent: the real server's 404 comes back, as a sentence."""
    res = job(proxy, member_token, "status", "no-such-job")
    assert res.code == 2 and "404" in res.err and "does not exist" in res.err
    assert ("GET", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{TEAM_NS}/jobsets/no-such-job", 404) in proxy.seen


@pytest.mark.parametrize(("status", "hint"), [(429, "shedding load"), (500, "the API server failed")])
def test_job_cli_on_a_server_error_exits_2_with_a_hint(proxy: FaultProxy, member_token: str, status: int,
                                                       hint: str) -> None:
    proxy.add("GET", "/jobsets/", status)
    res = job(proxy, member_token, "status", "any-job")
    assert res.code == 2, res.err
    assert f"read job any-job failed: {status}" in res.err and hint in res.err
    assert "Traceback" not in res.err + res.out


def test_job_cli_gives_up_on_a_server_that_never_answers(proxy: FaultProxy, member_token: str) -> None:
    proxy.add("GET", "/jobsets", HANG)
    started = time.monotonic()
    res = job(proxy, member_token, "status", "any-job", "--request-timeout", "1")
    assert res.code == 2 and "did not answer in time" in res.err and "--request-timeout" in res.err
    assert time.monotonic() - started < 10  # one retry at most, not the default minute


def reconciler_through(proxy: FaultProxy, stack: Stack, pool: Pool, *faulty: str,
                       sleeps: list[float] | None = None) -> tuple[Reconciler, str]:
    who = reconciler_identity(stack)
    api = connect(token=token_of(who), server=proxy.url, request_timeout=1)
    lease = LeaderLease(api, NAMESPACE, "replica-faulty", duration_seconds=3)
    slept = sleeps if sleeps is not None else []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    executor = Executor(api, sleep=sleep)
    return (Reconciler(executor, [Faulty(*(faulty or (pool.name(0),)))], pool.selector, Policy(),
                       BreakerStore(api, NAMESPACE), lease), credential_id(who))


def test_a_leader_that_cannot_renew_writes_nothing(proxy: FaultProxy, kube_stack: Stack) -> None:
    """The Lease answers 500 when the loop checks it before writing: leadership is not assumed."""
    reset_leadership(kube_stack)
    pool = Pool(kube_stack)
    pool.add(2)
    rec, me = reconciler_through(proxy, kube_stack, pool)
    assert rec.lease is not None and rec.lease.acquire()
    rec.lease._certain_until = time.monotonic()  # certainty spent: the next write must renew first
    proxy.add("*", "/leases/", 500)
    nodes = rec.executor.read(pool.selector)
    decision = decide(rec.sources[0].observe(sorted(nodes)), nodes, Policy(), rec.breaker.load(), time.time())
    assert decision.actions  # a cordon was decided ...
    assert rec.executor.apply(decision, rec.lease.still_leading) == []  # ... and not carried out
    assert pool.cordoned(ANNOTATION_OWNED) == set()
    assert writers(kube_stack, {me}) == set()
    proxy.clear()
    assert rec.once() is not None and pool.cordoned(ANNOTATION_OWNED) == {pool.name(0)}


@pytest.mark.parametrize("fault", [429, 500, HANG], ids=["429", "500", "no-answer"])
def test_a_transient_write_fault_is_retried_in_the_same_loop(proxy: FaultProxy, kube_stack: Stack,
                                                             fault: int) -> None:
    """Issue 13: one 429, 500 or unanswered PATCH used to end the loop. Now the write is retried
    (after Retry-After for a 429) and the node is cordoned in that same loop."""
    reset_leadership(kube_stack)
    pool = Pool(kube_stack)
    pool.add(2)
    sleeps: list[float] = []
    rec, _ = reconciler_through(proxy, kube_stack, pool, sleeps=sleeps)
    proxy.add("PATCH", "/api/v1/nodes/", fault, times=1)
    decision = rec.once()
    assert decision is not None and pool.cordoned(ANNOTATION_OWNED) == {pool.name(0)}
    assert rec.executor.failures == 0
    assert [status for method, path, status in proxy.seen
            if method == "PATCH" and "/nodes/" in path and not path.endswith("/status")] == [fault, 200]
    assert sleeps and (sleeps[0] == 1.0 if fault == 429 else sleeps[0] > 0)  # Retry-After: 1 honoured


@pytest.mark.parametrize("status", [422, 403], ids=["invalid", "forbidden"])
def test_a_node_that_keeps_failing_costs_only_that_node(proxy: FaultProxy, kube_stack: Stack, status: int) -> None:
    """The first node's writes are refused for good: it is given up with an audit line and no
    Event, and the second node is cordoned in the same loop."""
    reset_leadership(kube_stack)
    pool = Pool(kube_stack)
    pool.add(3)
    rec, _ = reconciler_through(proxy, kube_stack, pool, pool.name(0), pool.name(1))
    proxy.add("PATCH", f"/api/v1/nodes/{pool.name(0)}$", status)
    decision = rec.once()
    assert decision is not None and rec.executor.failures == 1
    assert pool.cordoned(ANNOTATION_OWNED) == {pool.name(1)}
    assert pool.events(pool.name(1)) and not pool.events(pool.name(0))
    assert len([1 for method, path, _ in proxy.seen if method == "PATCH" and path.endswith(pool.name(0))]) == 1


def test_a_node_deleted_before_its_write_is_skipped(proxy: FaultProxy, kube_stack: Stack) -> None:
    """A 404 from the real server: the node was deleted between the decision and the patch."""
    from kubernetes import client

    reset_leadership(kube_stack)
    pool = Pool(kube_stack)
    pool.add(4)  # 2 faults of 4 stay within the 50% breaker
    rec, _ = reconciler_through(proxy, kube_stack, pool, pool.name(0), pool.name(1))
    nodes = rec.executor.read(pool.selector)
    decision = decide(rec.sources[0].observe(sorted(nodes)), nodes, Policy(), {}, time.time())
    client.CoreV1Api(kube_stack.client()).delete_node(pool.name(0))
    rec.executor.apply(decision)
    assert rec.executor.failures == 1 and pool.cordoned(ANNOTATION_OWNED) == {pool.name(1)}


def test_a_failed_node_list_costs_one_loop_and_the_reconciler_goes_on(proxy: FaultProxy, kube_stack: Stack) -> None:
    """A 500 on the node list fails that loop (reported, not raised); the next loop cordons."""
    import threading

    reset_leadership(kube_stack)
    pool = Pool(kube_stack)
    pool.add(2)
    rec, _ = reconciler_through(proxy, kube_stack, pool)
    proxy.add("GET", r"/api/v1/nodes\?", 500, times=1)
    stop = threading.Event()
    loops: list[tuple[object, bool]] = []
    runner = threading.Thread(target=rec.run, args=(0.2, stop, lambda d, s, failed: loops.append((d, failed))))
    runner.start()
    try:
        wait_for(lambda: pool.cordoned(ANNOTATION_OWNED) == {pool.name(0)}, 20, step=0.2)
    finally:
        stop.set()
        runner.join(15)
    assert pool.cordoned(ANNOTATION_OWNED) == {pool.name(0)}
    assert (None, True) in loops  # the loop that met the fault failed and said so


def test_one_node_the_list_cannot_read_leaves_the_other_nodes_decisions_intact(proxy: FaultProxy,
                                                                                kube_stack: Stack) -> None:
    """The real server's node list with one Node made the wrong shape on the way: before, every loop
    failed on it (AttributeError) and nothing was cordoned anywhere. Now that node is skipped, its
    health unknown and nothing written to it, and the other faulty node is cordoned on the real
    API server in the same loop."""
    reset_leadership(kube_stack)
    pool = Pool(kube_stack)
    pool.add(4)
    rec, _ = reconciler_through(proxy, kube_stack, pool, pool.name(0), pool.name(1))
    proxy.add("GET", r"/api/v1/nodes\?(?!.*watch=true)", 200, edit=misshapen(pool.name(0)))
    decision = rec.once()
    assert decision is not None and rec.executor.failures == 0
    assert pool.cordoned(ANNOTATION_OWNED) == {pool.name(1)}
    assert rec.unreadable == {pool.name(0): "status.conditions is a string, not a list"}
    assert not pool.get(pool.name(0))["spec"].get("unschedulable")


def test_a_watch_refused_410_every_time_relists_a_few_times_not_a_storm(proxy: FaultProxy,
                                                                         kube_stack: Stack) -> None:
    """Every watch through the front is answered 410 Gone; the lists reach the real API server,
    whose audit log counts them: 2 or 3 in 5.5 s (client-go's backoff: the first at once, then
    after 0.8-1.6 s and 2.4-4.8 s), where the cache used to list 73 to 159 times in 8 s."""
    pool = Pool(kube_stack)
    pool.add(2)
    who = reconciler_identity(kube_stack)
    api = connect(token=token_of(who), server=proxy.url, request_timeout=2)
    proxy.add("GET", r"/api/v1/nodes\?.*watch=true", 410)
    cache = watch_for(NodeCache(api, pool.selector), 5.5)
    me = credential_id(who)
    assert wait_for(lambda: len(_node_lists(kube_stack, me)) == cache.lists, 10), (cache.lists, proxy.seen)
    assert 2 <= cache.lists <= 3
    view = cache.view()
    assert view is not None and sorted(n for n in view[0] if n.startswith(f"gpu-{pool.tag}-")) == [
        pool.name(0), pool.name(1)]


def _node_lists(stack: Stack, credential: str) -> list[dict[str, Any]]:
    return [e for e in stack.audit() if e.get("verb") == "list" and e.get("stage") == "ResponseComplete"
            and (e.get("objectRef") or {}).get("resource") == "nodes"
            and credential in ((e.get("user") or {}).get("extra") or {}).get(CREDENTIAL_ID, [])]
