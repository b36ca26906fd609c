"""Faults a real API server cannot be made to produce on demand (429, 500, no answer, an answer
trickled a byte at a time, a proxy's login page, JSON cut short or nested too deep, a hostile
published fleet), injected by tests/faultproxy.py in front of the real one (or of none, where every
request meets a fault): the CLI exits 2 with a sentence, the reconciler writes nothing it is not
sure of and recovers on the next loop."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
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
from tests.upstream.cluster import Stack
from tests.upstream.fleet import apply, kustomize_build
from tests.upstream.processes import wait_for
from tests.upstream.reconciler_env import (
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


def test_job_cli_gives_up_on_a_real_answer_trickled_a_byte_at_a_time(proxy: FaultProxy, member_token: str) -> None:
    """The real server's answer, a byte every 50 ms: each read comes far within the 1 s read timeout,
    the whole answer would take seconds; the request's deadline ends it at 1 s."""
    proxy.add("GET", "/jobsets/", HANG, trickle=0.05)
    started = time.monotonic()
    res = job(proxy, member_token, "status", "any-job", "--request-timeout", "1")
    assert res.code == 2 and "did not answer in time" in res.err and "--request-timeout" in res.err, res.err
    assert time.monotonic() - started < 3


@pytest.fixture
def front() -> Iterator[FaultProxy]:
    """A front with no server behind it: every request a test makes meets one of its faults."""
    alone = FaultProxy("https://127.0.0.1:9", Path("/nonexistent"))  # never forwarded to
    alone.serve()
    yield alone
    alone.shutdown()


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(("status", "body", "content_type", "said"), [
    (200, b"<html><body><form action=/login>Sign in</form></body></html>", "text/html; charset=utf-8",
     "answered with an HTML page (a proxy's or a single sign-on login page?) while trying to read job any-job"),
    (200, b'{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"na', "application/json",
     "answered with text that is not JSON, or JSON cut short (Unterminated string"),
    (200, DEEP, "application/json", "answered with JSON nested deeper than Python reads"),
    (200, b"<JobSet/>", "application/xml", "answered with content of type application/xml"),
    (200, b"", "application/json", "answered with an empty answer"),
], ids=["login-page", "cut-short", "too-deep", "xml", "empty"])
def test_an_answer_that_is_not_the_apis_json_exits_2_naming_the_cluster(front: FaultProxy, tmp_path: Path,
                                                                         status: int, body: bytes, content_type: str,
                                                                         said: str) -> None:
    front.add("*", "", status, body=body, content_type=content_type)
    res = run(REPO, "job", "status", "any-job", "--namespace", "ml-research", "--server", front.url, "--token", "t")
    assert res.code == 2, res.err
    assert res.err.startswith(f"the cluster at {front.url} {said}"), res.err
    assert "not with the Kubernetes API's JSON: check that --server or the --context's server is the API server" \
        in res.err
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "corp-proxy",
              "clusters": [{"name": "c", "cluster": {"server": front.url}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "corp-proxy", "context": {"cluster": "c", "user": "u"}}]}
    (tmp_path / "kubeconfig").write_text(json.dumps(config))
    res = run(REPO, "job", "status", "any-job", "--namespace", "ml-research",
              "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert res.code == 2 and res.err.startswith(f"the cluster at {front.url} (context corp-proxy) {said}"), res.err


def test_an_error_status_nested_too_deep_is_still_its_status(front: FaultProxy) -> None:
    front.add("*", "", 500, body=DEEP)
    res = run(REPO, "job", "status", "any-job", "--namespace", "ml-research", "--server", front.url, "--token", "t")
    assert res.code == 2 and "read job any-job failed: 500 Internal Server Error; the API server failed" in res.err, \
        res.err


def test_job_cli_gives_up_on_an_answer_trickled_a_byte_at_a_time(front: FaultProxy) -> None:
    """A Status of about 300 bytes, status line and headers too, a byte every 50 ms: about 15 s in all,
    each byte far within the 1 s read timeout. The request's deadline ends it at 1 s, retry included."""
    front.add("*", "", 404, trickle=0.05)
    started = time.monotonic()
    res = run(REPO, "job", "status", "any-job", "--namespace", "ml-research", "--server", front.url, "--token", "t",
              "--request-timeout", "1")
    assert res.code == 2 and f"the cluster at {front.url} did not answer in time while trying to read job any-job: " \
        "retry, or allow longer with --request-timeout SECONDS" in res.err, res.err
    assert time.monotonic() - started < 3


def test_the_deadline_ends_a_trickled_answer_over_tls_too(tmp_path: Path) -> None:
    """Under TLS a read blocks in the TLS layer: shutting the socket down wakes it all the same."""
    from tests.upstream.pki import ca, issue

    authority = ca("fleetgen-test-ca")
    served = issue(authority, "127.0.0.1", ips=("127.0.0.1",), server=True).write(tmp_path, "server")
    authority.write(tmp_path, "ca")
    tls = FaultProxy("https://127.0.0.1:9", Path("/nonexistent"))
    url = tls.serve(tls=served)
    try:
        tls.add("*", "", 404, trickle=0.05)
        started = time.monotonic()
        res = run(REPO, "job", "status", "any-job", "--namespace", "ml-research", "--server", url, "--token", "t",
                  "--certificate-authority", str(tmp_path / "ca.crt"), "--request-timeout", "1")
        assert res.code == 2 and f"the cluster at {url} did not answer in time" in res.err, res.err
        assert time.monotonic() - started < 3
    finally:
        tls.shutdown()


def test_a_hostile_published_fleet_sends_no_job(front: FaultProxy, tmp_path: Path) -> None:
    """Outside a checkout the job's namespace comes from the fleet files the cluster publishes. Here
    they give ml-research the namespace kube-system; the server would allow everything asked. The
    render-time checks refuse the files, and nothing is sent but the read of them."""
    from generator.checks import load_fleet
    from generator.compile.published import NAME, NAMESPACE, published_data

    fleet = load_fleet(REPO)
    data = published_data(fleet.clusters["prod-west"], fleet.teams_in("prod-west"))
    team = {**json.loads(data["team.ml-research.json"]), "namespaces": ["kube-system"]}
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NAMESPACE},
                 "data": {**data, "team.ml-research.json": json.dumps(team)}}
    front.add("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{NAME}$", 200, body=json.dumps(configmap).encode())
    allowed = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {"name": "x"},
               "spec": {"resourceAttributes": {}}, "status": {"allowed": True}}
    front.add("POST", "", 201, body=json.dumps(allowed).encode())
    front.add("GET", "", 200, body=json.dumps({"items": [], "metadata": {"name": "x"}}).encode())
    res = run(tmp_path, "job", "submit", "ml-research", "pretrain-4node", "--server", front.url, "--token", "t")
    assert res.code == 2, res.out + res.err
    assert "team.ml-research.json: namespaces[0]: namespace 'kube-system' is reserved for the platform" in res.err
    assert [(method, path) for method, path, _ in front.seen] == [
        ("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{NAME}")]


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
