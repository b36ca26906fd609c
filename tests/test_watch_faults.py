"""The node watch against an API server that misbehaves: tests/faultproxy.py on loopback answering
every request itself (a watch answered 410 every time or with garbage, a `continue` token that never
ends, a page dripped a byte at a time, a Node of the wrong shape). The watch backs off as client-go's
reflector does, a list ends within its bounds, the cache is trusted only once something applied, and
one bad Node costs that node only. (A correct server's side: test_reconciler_watch.py.)"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.jobs import Connection, connect
from generator.reconciler import nodes as nodes_module
from generator.reconciler.backoff import Backoff
from generator.reconciler.informer import NodeCache, Short
from generator.reconciler.loop import Reconciler
from generator.reconciler.model import Cordon, Policy
from generator.reconciler.nodes import LIST_MAX_NODES, LIST_MAX_PAGES, Executor, ListFailed, PoolSelector, list_nodes
from generator.reconciler.serve import Metrics
from tests.conftest import REPO, run
from tests.faultproxy import FaultProxy
from tests.upstream.reconciler_env import Faulty, watch_for

POOLS = [PoolSelector("h100", {"pool": "h100"})]
LIST = r"/api/v1/nodes\?(?!.*watch=true)"
WATCH = r"/api/v1/nodes\?.*watch=true"


def node(name: str, **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "5", "labels": {"pool": "h100"}},
            "spec": {}, "status": {"capacity": {"nvidia.com/gpu": "8"}}, **fields}


def node_list(*items: dict[str, Any], token: str = "") -> bytes:
    return json.dumps({"kind": "NodeList", "apiVersion": "v1", "items": list(items),
                       "metadata": {"resourceVersion": "5", **({"continue": token} if token else {})}}).encode()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class NoBreakers:
    def load(self) -> dict[str, Any]:
        return {}


@pytest.fixture
def server() -> Iterator[FaultProxy]:
    """The whole API server: every request the tests make meets a fault with its own answer (the
    upstream address is never dialled)."""
    front = FaultProxy("https://127.0.0.1:9", Path("no-ca.crt"))
    front.serve()
    yield front
    front.shutdown()


def api_of(server: FaultProxy) -> Connection:
    return connect(token="test", server=server.url, request_timeout=5)


def lists(server: FaultProxy) -> int:
    return sum(1 for method, path, _ in list(server.seen) if method == "GET" and "limit=" in path)


@pytest.mark.parametrize("watch", [
    {"status": 410},
    {"status": 200, "body": b'{"type": "ADDED", "object": "a string"}\n'},
], ids=["410", "not-a-node"])
def test_a_watch_that_fails_every_time_relists_with_client_gos_backoff(server: FaultProxy,
                                                                       watch: dict[str, Any]) -> None:
    """Every watch fails in a way that needs a new list (410 Gone; an event that is not a Node's: any
    other, test_node_cache.py, ends the watch the same way). Each list after the first waits a step of
    800 ms doubling, jittered up to twice that: the first list at once, then at 0.8-1.6, 2.4-4.8 and
    5.6-11.2 s, so 3 in 5.5 s (2 if the machine is slow enough to delay the third by 0.7 s).
    Without the backoff: 73 to 159 lists in 8 s."""
    server.add("GET", LIST, 200, body=node_list(node("a")))
    server.add("GET", WATCH, watch.pop("status"), **watch)
    cache = watch_for(NodeCache(api_of(server), POOLS), 5.5)
    assert 2 <= lists(server) <= 3, server.seen
    assert cache.lists == lists(server)


def test_a_watch_that_ends_at_once_is_retried_after_a_backoff_not_in_a_loop(server: FaultProxy) -> None:
    """A watch answered 200 with nothing in it, every time: client-go calls it a very short watch.
    Retried from the same version after each backoff step (3 watches in 5.5 s, as the lists above),
    not thousands of times (7,753 in 8 s before), and no new list."""
    server.add("GET", LIST, 200, body=node_list(node("a")))
    server.add("GET", WATCH, 200, body=b"")
    watch_for(NodeCache(api_of(server), POOLS), 5.5)
    watches = [path for method, path, _ in list(server.seen) if "watch=true" in path]
    assert lists(server) == 1 and 2 <= len(watches) <= 3, server.seen


@pytest.mark.parametrize("items,requests,bound", [
    (0, 40, "did not end after 40 pages"),
    (250, 11, "passed 2500 Nodes"),
], ids=["empty-pages", "full-pages"])
def test_an_endless_continue_ends_within_a_bound(server: FaultProxy, monkeypatch: pytest.MonkeyPatch, items: int,
                                                  requests: int, bound: str) -> None:
    """Every page says there is more. The list stops at its page or Node bound (here a tenth of
    `LIST_MAX_PAGES` and a twentieth of `LIST_MAX_NODES`, for time: 400 empty pages take 18 s on a
    loaded 2-core machine) with an error saying so; the node cache then backs off and lists again,
    a loop that lists fails and says why."""
    monkeypatch.setattr(nodes_module, "LIST_MAX_PAGES", LIST_MAX_PAGES // 10)
    monkeypatch.setattr(nodes_module, "LIST_MAX_NODES", LIST_MAX_NODES // 20)
    server.add("GET", LIST, 200, body=node_list(*(node(f"n-{i}") for i in range(items)), token="more"))
    outcome: list[BaseException] = []

    def listing() -> None:
        try:
            list_nodes(api_of(server), POOLS)
        except BaseException as exc:  # noqa: BLE001 - what the list ended in, for the assertion
            outcome.append(exc)

    thread = threading.Thread(target=listing, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the list never ended"
    assert len(outcome) == 1 and isinstance(outcome[0], ListFailed) and bound in str(outcome[0]), outcome
    assert lists(server) == requests


def test_a_loop_whose_list_never_ends_fails_and_says_why(server: FaultProxy, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A loop lists for itself (no current cache) and meets the endless `continue`: that loop fails
    with one line saying why (no traceback), and the next loop tries again."""
    monkeypatch.setattr(nodes_module, "LIST_MAX_PAGES", 5)
    server.add("GET", LIST, 200, body=node_list(node("a"), token="more"))
    rec = Reconciler(Executor(api_of(server), dry_run=True), [Faulty()], POOLS, Policy(dry_run=True),
                     NoBreakers())  # type: ignore[arg-type]
    stop = threading.Event()
    loops: list[bool] = []

    def on_loop(decision: Any, seconds: float, failed: bool) -> None:
        loops.append(failed)
        if len(loops) == 2:
            stop.set()

    thread = threading.Thread(target=rec.run, args=(0.1, stop, on_loop), daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and loops == [True, True] and lists(server) == 10
    failures = [r for r in caplog.records if "did not end after 5 pages" in r.getMessage()]
    assert len(failures) == 2 and all(r.exc_info is None for r in failures)


@pytest.mark.parametrize("page,why", [
    (node_list(node("a"), token="more"), "it did not end after 5 pages of at most 250 (5 Nodes): the API server "
                                         "keeps answering with a continue token"),
    (b'{"kind": "NodeList", "items": 5}', "the API server answered something that is not a NodeList"),
    (b"[1]", "the API server answered something that is not a NodeList"),
    (b'{"items": [], "metadata": {"continue": 7}}', "its continue token is a number, not a string"),
    (b"<html>502 Bad Gateway</html>", "the API server answered something that is not JSON"),
    (b"[" * 100_000, "the API server answered something that is not JSON"),
], ids=["endless", "items-not-a-list", "not-an-object", "token-not-a-string", "not-json", "too-deep"])
def test_health_once_on_a_list_it_cannot_use_exits_2_with_the_reason(server: FaultProxy,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      page: bytes, why: str) -> None:
    """`fleetgen health once` lists the Nodes itself: on an endless `continue` or a list that is not
    one it exits 2 with what it met, not an internal error (and not never)."""
    monkeypatch.setattr(nodes_module, "LIST_MAX_PAGES", 5)
    server.add("GET", LIST, 200, body=page)
    res = run(REPO, "health", "once", "--cluster", "dev", "--dry-run", "--server", server.url, "--token", "t")
    assert res.code == 2 and res.err == f"error: node list failed: {why}\n", res.err
    assert "Traceback" not in res.out


L4 = {"nvidia.com/gpu.product": "NVIDIA-L4"}


@pytest.mark.parametrize("verb", ["status", "once"])
def test_health_status_and_once_name_the_node_they_could_not_read(server: FaultProxy, verb: str) -> None:
    """dev's l4 pool, one Node of three with `status.capacity` a list: `health status` and `health
    once` (dry run) read the other two and name that one with its field; before, both ended in
    "internal error AttributeError"."""
    bad = {"metadata": {"name": "l4-2", "labels": L4}, "status": {"capacity": ["nvidia.com/gpu"]}}
    page = node_list(*({"metadata": {"name": f"l4-{i}", "labels": L4}} for i in range(2)), bad)
    server.add("GET", LIST, 200, body=page)
    server.add("GET", "/configmaps/", 404, body=b'{"kind": "Status", "code": 404}')  # no breaker tripped yet
    server.add("*", "/query", 503, body=b"{}")  # Prometheus down: every node unknown, nothing decided
    dry_run = ["--dry-run"] if verb == "once" else []
    res = run(REPO, "health", verb, "--cluster", "dev", *dry_run, "--server", server.url, "--token", "t",
              "--prometheus", server.url)
    assert res.code == 0, res.err
    assert res.out.endswith("1 Node(s) unreadable, health unknown, nothing done to them:\n"
                            "  l4-2: status.capacity is a list, not an object\n"), res.out
    if verb == "status":
        assert "pool l4: 0 of 2 nodes unschedulable" in res.out


def test_a_list_that_drips_ends_at_its_deadline(server: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """One page sent a byte every 20 ms (its 1,000 bytes would take 20 s; no single read waits long
    enough for the read timeout): the list's deadline ends it, not the server."""
    monkeypatch.setattr(nodes_module, "LIST_DEADLINE_SECONDS", 2.0)
    page = node_list(*(node(f"n-{i}") for i in range(5)), token="more")
    server.add("GET", LIST, 200, body=page, trickle=0.02)
    started = time.monotonic()
    with pytest.raises(ListFailed, match="took more than 2 s"):
        list_nodes(api_of(server), POOLS)
    assert time.monotonic() - started < 4


def test_the_cache_is_current_again_only_once_an_event_applies(server: FaultProxy) -> None:
    """The watch failed a minute ago. A new watch that connects and ends without an event (or with
    one that cannot be applied) proves nothing: the view stays untrusted and loops list for
    themselves. The first event that applies (a bookmark) makes it current again."""
    clock = Clock()
    server.add("GET", LIST, 200, body=node_list(node("a")))
    cache = NodeCache(api_of(server), POOLS, monotonic=clock)
    cache.relist()
    cache._broke()  # noqa: SLF001 - a watch request failed
    clock.now += 61
    assert cache.view() is None
    server.add("GET", WATCH, 200, body=b"", times=1)
    with contextlib.suppress(Short):  # (it is: test_a_watch_that_ends_at_once_...)
        cache.watch()
    assert cache.view() is None, "a watch that connected made the cache current"
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Node", "metadata": {"resourceVersion": "7"}}}
    server.add("GET", WATCH, 200, body=json.dumps(bookmark).encode() + b"\n", times=1)
    cache.watch()
    assert cache.view() is not None and cache.version == "7"


def test_a_node_of_the_wrong_shape_in_an_event_is_that_node_unknown(server: FaultProxy) -> None:
    """A MODIFIED event whose Node has `status.conditions` as a string: before, it raised inside the
    watch, which resumed from the same version, met the same event, and so on, while the cache
    said it was current. Now that node drops out of the view, counted with why; the events after it
    apply; a good event of it brings it back."""
    server.add("GET", LIST, 200, body=node_list(node("a"), node("b")))
    cache = NodeCache(api_of(server), POOLS)
    cache.relist()
    events = [{"type": "MODIFIED", "object": node("a", status={"conditions": "GPUHealthy"})},
              {"type": "MODIFIED", "object": node("b", spec={"unschedulable": True})}]
    for index, event in enumerate(events):
        event["object"]["metadata"]["resourceVersion"] = str(6 + index)
    server.add("GET", WATCH, 200, body=b"".join(json.dumps(e).encode() + b"\n" for e in events), times=1)
    cache.watch()
    view = cache.view()
    assert view is not None and sorted(view[0]) == ["b"] and view[0]["b"].unschedulable
    assert cache.unreadable() == {"a": "status.conditions is a string, not a list"} and cache.version == "7"
    good = {"type": "MODIFIED", "object": node("a")}
    good["object"]["metadata"]["resourceVersion"] = "8"
    server.add("GET", WATCH, 200, body=json.dumps(good).encode() + b"\n", times=1)
    cache.watch()
    view = cache.view()
    assert view is not None and sorted(view[0]) == ["a", "b"] and cache.unreadable() == {}


@pytest.mark.parametrize("bad", [
    {"status": {"conditions": [{"type": "Ready"}, "GPUHealthy"]}},
    {"metadata": {"name": "c", "labels": ["pool", "h100"]}},
    {"metadata": {"name": "c", "labels": {"pool": "h100"}, "annotations": {"health.fleetgen.io/since": 5}}},
    {"spec": "unschedulable"},
    {"status": {"capacity": [8]}},
], ids=["condition", "labels", "annotation", "spec", "capacity"])
def test_one_bad_node_in_a_list_leaves_the_other_nodes_decisions_intact(server: FaultProxy,
                                                                         bad: dict[str, Any]) -> None:
    """One of four Nodes has a field of the wrong type: before, every loop failed on it. Now the loop
    skips it (its health unknown: nothing done to it), says which and why, counts it in
    `fleetgen_health_nodes_unreadable`, and decides every other node as before (a cordon of `b`)."""
    server.add("GET", LIST, 200, body=node_list(node("a"), node("b"), node("c", **bad), node("d")))
    executor = Executor(api_of(server), dry_run=True)
    rec = Reconciler(executor, [Faulty("b", "c")], POOLS, Policy(dry_run=True), NoBreakers())  # type: ignore[arg-type]
    decision = rec.once()
    assert decision is not None and sorted(rec.nodes) == ["a", "b", "d"]
    assert sorted(a.node for a in decision.actions if isinstance(a, Cordon)) == ["b"]
    assert list(rec.unreadable) == ["c"] and rec.unreadable["c"]
    metrics = Metrics(["h100"])
    metrics.record(decision, rec.nodes, 0.1, unreadable=len(rec.unreadable))
    from prometheus_client import generate_latest

    assert b"fleetgen_health_nodes_unreadable 1.0" in generate_latest(metrics.registry)


def test_the_backoff_is_client_gos() -> None:
    """800 ms doubling to the 30 s cap, each step plus up to the same again (jitter 1.0), and back to
    800 ms once two minutes passed since the last reset (client-go v0.36.3 reflector.go:62-67,
    apimachinery wait/backoff.go:98-126, 292-304)."""
    clock = Clock()
    low = Backoff(clock, rand=lambda: 0.0)
    assert [low.next() for _ in range(9)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]
    high = Backoff(clock, rand=lambda: 1.0)
    assert [round(high.next(), 6) for _ in range(7)] == [1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 60.0]
    clock.now += 121
    assert low.next() == 0.8 and low.next() == 1.6


def test_a_page_larger_than_any_node_list_ends_the_list(server: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page past `LIST_MAX_PAGE_BYTES` (here 4 KiB, for time; 64 MiB in the reconciler) is a list
    failure named as such, read no further than the bound: before, the whole answer was held in
    memory, however large."""
    monkeypatch.setattr(nodes_module, "LIST_MAX_PAGE_BYTES", 4096, raising=False)
    server.add("GET", LIST, 200, body=node_list(*(node(f"n-{i}") for i in range(100))))
    with pytest.raises(ListFailed, match="a page was larger than 0 MiB"):
        list_nodes(api_of(server), POOLS)


BOOKMARK = b'{"type": "BOOKMARK", "object": {"kind": "Node", "metadata": {"resourceVersion": "7"}}}\n'


@pytest.mark.parametrize("body", [b"{" + b" " * 100_000, BOOKMARK + b"[" * 100_000],
                         ids=["one-endless-line", "after-an-event"])
def test_a_watch_line_that_never_ends_breaks_the_watch(server: FaultProxy, monkeypatch: pytest.MonkeyPatch,
                                                       body: bytes) -> None:
    """A watch that sends bytes with no end of line (here past 4 KiB; 16 MiB in the reconciler) is a
    broken watch, before its line fills memory: the client's own reader kept buffering it."""
    from generator.reconciler import informer

    monkeypatch.setattr(informer, "WATCH_MAX_LINE_BYTES", 4096, raising=False)
    server.add("GET", LIST, 200, body=node_list(node("a")))
    cache = NodeCache(api_of(server), POOLS)
    cache.relist()
    server.add("GET", WATCH, 200, body=body, times=1)
    with pytest.raises(informer.Broken, match="a watch line longer than 0 MiB"):
        cache.watch()
    assert cache.version == ("7" if body.startswith(BOOKMARK) else "5")


def test_watch_lines_split_as_they_come() -> None:
    """The watch's line reader: lines split across reads and several in one read come out whole,
    in order; a line the stream ended in the middle of is dropped (the connection dropped)."""
    from generator.reconciler.informer import _lines

    class Answer:
        def __init__(self, *reads: bytes) -> None:
            self.reads = list(reads)

        def read1(self, amt: int) -> bytes:
            return self.reads.pop(0) if self.reads else b""

    answer = Answer(b'{"a"', b": 1}\n{\"b\": 2}\n\n{\"c\"", b": 3}\n{\"cut")
    assert list(_lines(answer)) == [b'{"a": 1}', b'{"b": 2}', b"", b'{"c": 3}']
