"""The node cache's events, one at a time, without a server: what each does to the view, what it
refuses, and when the view stops being trusted (the real API server's side is in
test_reconciler_watch.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.reconciler.informer import Broken, Expired, NodeCache
from generator.reconciler.loop import Reconciler
from generator.reconciler.model import ANNOTATION_OWNED, ANNOTATION_SINCE, Policy
from generator.reconciler.nodes import PoolSelector, Unreadable, node_state
from tests.node_events import Clock, event, node

POOLS = [PoolSelector("h100", {"pool": "h100"})]


@pytest.fixture
def cache() -> NodeCache:
    c = NodeCache(None, POOLS, monotonic=Clock())
    c.version = "10"  # as after a list of no nodes
    c._must_list = False  # noqa: SLF001
    return c


def states(c: NodeCache) -> dict[str, Any]:
    view = c.view()
    assert view is not None
    return view[0]


def test_each_event_changes_only_its_node(cache: NodeCache) -> None:
    cache.apply(event("ADDED", node("a", "11")))
    cache.apply(event("ADDED", node("b", "12")))
    cache.apply(event("ADDED", node("cpu", "13", pool=None)))
    assert sorted(states(cache)) == ["a", "b"] and cache.version == "13"
    cache.apply(event("MODIFIED", node("a", "14", **{ANNOTATION_OWNED: "true"})))
    assert states(cache)["a"].owned and not states(cache)["b"].owned
    cache.apply(event("MODIFIED", node("b", "15", pool="elsewhere")))  # relabelled out of the pool
    assert sorted(states(cache)) == ["a"]
    cache.apply(event("DELETED", node("a", "16")))
    cache.apply(event("BOOKMARK", {"kind": "Node", "metadata": {"resourceVersion": "20"}}))
    assert states(cache) == {} and cache.version == "20" and cache.events == 7
    view = cache.view()
    assert view is not None and view[1] == {"b": "uid-b", "cpu": "uid-cpu"}


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
FIELDS = st.sampled_from(["spec", "status", "unschedulable", "capacity", "nodeInfo", "conditions", "bootID",
                          "nvidia.com/gpu", "type", "status", "reason", "message", ANNOTATION_OWNED, ANNOTATION_SINCE,
                          "health.fleetgen.io/cordon-history", "health.fleetgen.io/healthy-checks"])
SHAPED = st.recursive(JSON, lambda inner: st.dictionaries(FIELDS, inner, max_size=4) | st.lists(inner, max_size=3),
                      max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(spec=SHAPED, status=SHAPED, annotations=SHAPED, labels=st.one_of(st.just({"pool": "h100"}), SHAPED))
def test_any_json_is_a_node_state_or_unreadable_never_a_crash(spec: Any, status: Any, annotations: Any,
                                                              labels: Any) -> None:
    """Whatever a server puts in a Node's fields, reading it gives a NodeState with fields of their
    declared types, nothing (not in a pool), or Unreadable naming the field: a wrongly typed Node
    used to raise AttributeError or TypeError out of the list, failing every loop."""
    obj = {"metadata": {"name": "a", "labels": labels, "annotations": annotations}, "spec": spec, "status": status}
    try:
        state = node_state(obj, POOLS)
    except Unreadable as exc:
        assert exc.name == "a" and " is " in exc.why and ", not " in exc.why
        return
    if state is None:
        return
    assert isinstance(state.reason, str) and isinstance(state.human_released, str)
    assert isinstance(state.cordon_boot_id, str) and isinstance(state.boot_id, str) and isinstance(state.gpus, int)
    assert state.since is None or isinstance(state.since, float)
    assert all(isinstance(t, float) for t in state.history)


def test_a_hostile_annotation_makes_the_value_unknown_not_the_list_fail() -> None:
    state = node_state(node("a", "1", **{ANNOTATION_SINCE: "not-a-time", "fleetgen.io/healthy-checks": "1e999"}),
                       POOLS)
    assert state is not None and state.since is None
    assert node_state(node("a", "1", **{ANNOTATION_SINCE: "inf"}), POOLS).since is None  # type: ignore[union-attr]
    deep = node_state(node("a", "1", **{"health.fleetgen.io/cordon-history": "[" * 200_000}), POOLS)
    assert deep is not None and deep.history == ()  # json.loads' RecursionError, as deep as 256 KiB allows
    with pytest.raises(Unreadable, match="no metadata.name"):  # not a Node: skipped and counted by the list
        node_state({"metadata": {"labels": {"pool": "h100"}}}, POOLS)


@pytest.mark.parametrize("line,error", [
    ("{not json", Broken),
    ("[" * 100_000, Broken),  # json.loads' RecursionError
    (json.dumps([1, 2]), Broken),
    (event("SURPRISE", node("a", "11")), Broken),
    (event("ADDED", {"metadata": {"name": "a"}}), Broken),  # no resourceVersion
    (event("ADDED", {"metadata": {"resourceVersion": "11"}}), Broken),  # no name
    (event("ADDED", "a string"), Broken),
    (event("ERROR", {"kind": "Status", "code": 500, "message": "etcd is down"}), Broken),
    (event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}),
     Expired),
])
def test_what_cannot_be_applied_ends_the_watch(cache: NodeCache, line: str, error: type[Exception]) -> None:
    cache.apply(event("ADDED", node("a", "11")))
    with pytest.raises(error):
        cache.apply(line)
    assert sorted(states(cache)) == ["a"] and cache.version == "11"  # nothing half-applied


def test_the_view_is_trusted_only_while_the_watch_works(cache: NodeCache) -> None:
    clock: Any = cache.monotonic
    assert NodeCache(None, POOLS).view() is None  # never listed
    cache._broke()  # noqa: SLF001 - a watch request failed
    clock.now += 59
    assert cache.view() is not None
    clock.now += 2
    assert cache.view() is None  # a minute without a watch: loops list for themselves


class Listing:
    """An executor that counts lists."""

    dry_run = True
    failures = 0
    unreadable: dict[str, str] = {}

    def __init__(self) -> None:
        self.lists = 0
        self.uids: dict[str, str] = {}

    def read(self, pools: Any) -> dict[str, Any]:
        self.lists += 1
        return {}

    def remember(self, uids: dict[str, str]) -> None:
        self.uids = uids

    def apply(self, decision: Any, may_write: Any = None) -> list[str]:
        return []


class NoBreakers:
    def load(self) -> dict[str, Any]:
        return {}


class Silent:
    def observe(self, nodes: list[str]) -> dict[str, Any]:
        return {}


def test_a_loop_reads_the_cache_and_lists_only_when_it_is_not_current(cache: NodeCache) -> None:
    cache.apply(event("ADDED", node("a", "11")))
    executor = Listing()
    rec = Reconciler(executor, [Silent()], POOLS, Policy(dry_run=True), NoBreakers(), cache=cache)  # type: ignore[arg-type]
    rec.once()
    assert executor.lists == 0 and sorted(rec.nodes) == ["a"] and executor.uids == {"a": "uid-a"}
    cache._broke()  # noqa: SLF001
    cache.monotonic.now += 3600  # type: ignore[attr-defined]
    rec.once()
    assert executor.lists == 1


def test_run_settles_the_heap_after_its_first_loop_and_after_each_list(monkeypatch: pytest.MonkeyPatch,
                                                                       cache: NodeCache) -> None:
    """gc.freeze after the first loop and after the cache lists again, never on other loops: a full
    collection would otherwise walk the whole node cache in the middle of some loop."""
    import threading

    from generator.reconciler import loop

    settled: list[int] = []
    monkeypatch.setattr(loop, "settle_heap", lambda: settled.append(cache.lists))
    monkeypatch.setattr(cache, "start", lambda stop: None)  # the test moves the cache by hand
    cache.apply(event("ADDED", node("a", "11")))
    stop = threading.Event()
    loops = 0

    def on_loop(decision: Any, seconds: float, failed: bool) -> None:
        nonlocal loops
        loops += 1
        assert not failed
        if loops == 3:
            cache.lists += 1  # a 410: the cache listed again
        if loops == 6:
            stop.set()

    rec = Reconciler(Listing(), [Silent()], POOLS, Policy(dry_run=True), NoBreakers(), cache=cache)  # type: ignore[arg-type]
    rec.run(0.0, stop, on_loop)
    assert loops == 6 and settled == [cache.lists - 1, cache.lists]
