"""Issue 33: the loop costs what changed (the sources say which nodes' Observations may differ, only
those are merged again, and the decision does not look at calm nodes nothing changed), and decides
exactly what a loop that reads everything afresh decides.

The proof is a search over random loops: presence values, DCGM XIDs, kernel-log lines, failing
queries, a Loki that is down, Nodes cordoned, uncordoned, relabelled, deleted and added back,
relists. After every loop the reconciler's decision (made from what changed) must equal `decide`
on fresh sources' `merge` (made from everything).
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from generator.compile.rules import EXPORTER, XID_METRIC, sxid_lines_query, xid_lines_query
from generator.reconciler.decide import _healthy_condition, decide
from generator.reconciler.informer import NodeCache
from generator.reconciler.loop import Reconciler, merge, merge_changes
from generator.reconciler.model import Evidence, NodeState, Observation, Policy
from generator.reconciler.nodes import PoolSelector
from generator.reconciler.sources import PRESENCE_QUERY, LokiSource, PrometheusSource, SourceError

NAMES = [f"gpu-{i}" for i in range(24)]
XID_QUERY = f"max by (node, gpu, xid) ({XID_METRIC}{EXPORTER}) > 0"
POLICY = Policy(cordons_per_loop=2, max_unhealthy_percent=40)


def _vector(result: list[Any], when: float) -> bytes:
    """Written as Prometheus writes it (compact, the evaluation time in every sample)."""
    for item in result:
        item["value"] = [when, item["value"]]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}},
                      separators=(",", ":")).encode()


class World:
    """What the sources and the API server would say this loop."""

    def __init__(self) -> None:
        self.presence: dict[str, str] = dict.fromkeys(NAMES, "8")
        self.xid: dict[str, str] = {}
        self.kernel: dict[str, str] = {}
        self.xid_fails = False
        self.loki_down = False
        self.nodes = {n: NodeState(n, f"pool-{i % 2}", gpus=8, condition=_healthy_condition(8))
                      for i, n in enumerate(NAMES)}
        self.when = 1_764_000_000.0

    def answer(self, expr: str) -> bytes:
        if expr == PRESENCE_QUERY:
            return _vector([{"metric": {"node": n}, "value": v} for n, v in self.presence.items()], self.when)
        if expr == XID_QUERY:
            if self.xid_fails:
                raise SourceError("prometheus answered 422", answered=True)
            return _vector([{"metric": {"node": n, "gpu": "1", "xid": x}, "value": "1"} for n, x in self.xid.items()],
                           self.when)
        return _vector([], self.when)

    def lines(self, expr: str) -> list[dict[str, Any]]:
        if self.loki_down:
            raise SourceError("loki query failed: connection refused")
        if expr == xid_lines_query(window="5m"):
            return [{"metric": {"k8s_node_name": n, "xid": x}, "value": [self.when, "2"]}
                    for n, x in self.kernel.items()]
        assert expr == sxid_lines_query(window="5m")
        return []


class Prometheus(PrometheusSource):
    def __init__(self, world: World) -> None:
        super().__init__("http://world")
        self.world = world

    def answer(self, expr: str) -> bytes:
        return self.world.answer(expr)


class Loki(LokiSource):
    def __init__(self, world: World) -> None:
        super().__init__("http://world")
        self.world = world

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.world.lines(expr)


class NoBreakers:
    def load(self) -> dict[str, Any]:
        return {}


CHANGES = st.lists(st.tuples(
    st.sampled_from(["presence", "xid", "kernel", "xid_fails", "loki_down", "cordon", "ours", "uncordon",
                     "condition", "gpus", "delete", "pool"]),
    st.integers(0, 7),  # a few nodes, so that changes meet: set, then cleared, then set again
    st.sampled_from(["8", "7", "-1", "NaN", "99", "79", "13", "48", ""])), max_size=6)


def _change(world: World, kind: str, index: int, value: str, held: dict[str, NodeState]) -> str | None:
    """Apply one change; the node whose state changed (for the node cache's change set)."""
    name = NAMES[index]
    node = world.nodes.get(name)
    if kind == "presence":
        if value in ("", "13", "48", "79"):
            world.presence.pop(name, None)
        else:
            world.presence[name] = value
    elif kind == "xid":
        world.xid.pop(name, None) if value in ("", "8", "7") else world.xid.__setitem__(name, value)
    elif kind == "kernel":
        world.kernel.pop(name, None) if value in ("", "8", "-1") else world.kernel.__setitem__(name, "79")
    elif kind == "xid_fails":
        world.xid_fails = not world.xid_fails
    elif kind == "loki_down":
        world.loki_down = not world.loki_down
    elif kind == "delete":
        if node is None:
            world.nodes[name] = held.pop(name, NodeState(name, "pool-0", gpus=8))
        else:
            held[name] = world.nodes.pop(name)
        return name
    elif node is not None:
        world.nodes[name] = {
            "cordon": lambda: NodeState(name, node.pool, unschedulable=True, gpus=node.gpus, condition=node.condition),
            "ours": lambda: NodeState(name, node.pool, unschedulable=True, owned=True, reason="xid-79",
                                      since=world.when - 4000, healthy_checks=index % 4, gpus=node.gpus),
            "uncordon": lambda: NodeState(name, node.pool, gpus=node.gpus, condition=node.condition),
            "condition": lambda: NodeState(name, node.pool, node.unschedulable, node.owned, node.reason, node.since,
                                           gpus=node.gpus, condition=None if node.condition else _healthy_condition(8)),
            "gpus": lambda: NodeState(name, node.pool, node.unschedulable, node.owned, node.reason, node.since,
                                      gpus=7 if node.gpus == 8 else 8, condition=node.condition),
            "pool": lambda: NodeState(name, "pool-1" if node.pool == "pool-0" else "pool-0", node.unschedulable,
                                      node.owned, node.reason, node.since, gpus=node.gpus, condition=node.condition),
        }[kind]()
        return name
    return None


@settings(max_examples=80, deadline=None)
@given(st.lists(CHANGES, min_size=1, max_size=10), st.randoms(use_true_random=False))
def test_a_loop_that_follows_change_decides_as_one_that_reads_everything(steps: list[list[tuple[str, int, str]]],
                                                                         rng: random.Random) -> None:
    world = World()
    reconciler = Reconciler(executor=None, sources=[Prometheus(world), Loki(world)],  # type: ignore[arg-type]
                            pools=[], policy=POLICY, breaker=NoBreakers(),  # type: ignore[arg-type]
                            clock=lambda: world.when)
    pending: Any = {}
    held: dict[str, NodeState] = {}
    for step in steps:
        moved: set[str] | None = set()
        for kind, index, value in step:
            name = _change(world, kind, index, value, held)
            if name is not None and moved is not None:
                moved.add(name)
        if rng.random() < 0.1:
            moved = None  # the cache listed again
        if rng.random() < 0.1:
            reconciler._seen = None  # noqa: SLF001 - a loop that failed: the next starts over
        world.when += 30
        decision, _ = reconciler.think(dict(world.nodes), moved)
        names = sorted(world.nodes)
        fresh = merge(Prometheus(world).observe(names), Loki(world).observe(names))
        expected = decide(fresh, dict(world.nodes), POLICY, {}, world.when, pending)
        assert decision == expected
        pending = expected.pending
        assert reconciler._seen is not None and reconciler._seen.observations == fresh  # noqa: SLF001


def test_calm_nodes_are_not_looked_at_and_the_decision_is_the_same() -> None:
    """`decide` with the last decision's calm nodes given decides the same, and keeps them calm."""
    nodes = {n: NodeState(n, "pool-0", gpus=8, condition=_healthy_condition(8)) for n in NAMES}
    nodes["gpu-1"] = NodeState("gpu-1", "pool-0", gpus=8)  # no condition yet: a write, not calm
    observations = {n: Observation(n, gpus_reporting=8) for n in NAMES}
    observations["gpu-2"] = Observation("gpu-2", (Evidence("xid-79", "cordon", "0"),), gpus_reporting=8)
    first = decide(observations, nodes, POLICY, {}, 1000.0)
    assert first.calm == frozenset(NAMES) - {"gpu-1", "gpu-2"}

    class Watching(dict[str, Observation]):
        looked: set[str] = set()

        def get(self, key: str, default: Any = None) -> Any:
            self.looked.add(key)
            return super().get(key, default)

    watched = Watching(observations)
    again = decide(watched, nodes, POLICY, {}, 1030.0, first.pending, calm=first.calm)
    assert again == decide(observations, nodes, POLICY, {}, 1030.0, first.pending)
    assert watched.looked == {"gpu-1", "gpu-2"}


def test_merge_changes_is_merge_of_what_changed() -> None:
    a = {n: Observation(n, gpus_reporting=8) for n in NAMES}
    b = {n: Observation(n) for n in NAMES}
    last, changed = merge_changes([(a, None), (b, None)], None)
    assert changed is None and last == merge(a, b)
    a2 = {**a, "gpu-3": Observation("gpu-3", unknown_signals=("exporter",))}
    b2 = {**b, "gpu-4": Observation("gpu-4", (Evidence("xid-79", "cordon"),), unknown_signals=("kernel_log",))}
    out, changed = merge_changes([(a2, {"gpu-3"}), (b2, {"gpu-4"})], last)
    assert changed == {"gpu-3", "gpu-4"} and out == merge(a2, b2)
    assert out["gpu-5"] is last["gpu-5"]


def test_sources_name_only_what_changed() -> None:
    world = World()
    prom, loki = Prometheus(world), Loki(world)
    first, changed = prom.observe_changes(NAMES)
    assert changed is None
    world.when += 30
    again, changed = prom.observe_changes(NAMES)
    assert changed == set() and all(again[n] is first[n] for n in NAMES)
    world.presence["gpu-5"] = "-1"
    world.xid["gpu-6"] = "79"
    _, changed = prom.observe_changes(NAMES)
    assert changed == {"gpu-5", "gpu-6"}
    del world.xid["gpu-6"]
    observed, changed = prom.observe_changes(NAMES)
    assert changed == {"gpu-6"} and observed["gpu-6"].quiet  # evidence last loop, none now
    assert loki.observe_changes(NAMES)[1] is None
    world.kernel["gpu-7"] = "79"
    assert loki.observe_changes(NAMES)[1] == {"gpu-7"}
    del world.kernel["gpu-7"]
    assert loki.observe_changes(NAMES)[1] == {"gpu-7"}  # it said something last loop: now it says nothing
    assert loki.observe_changes(NAMES)[1] == set()
    assert loki.observe_changes(NAMES[:-1])[1] is None  # other nodes: start over


def test_the_node_cache_says_which_nodes_changed_since_the_last_view() -> None:
    from tests.node_events import Clock, event, node

    clock = Clock()
    cache = NodeCache(None, [PoolSelector("h100", {"pool": "h100"})], monotonic=clock)
    cache.version = "10"
    cache._must_list = False  # noqa: SLF001
    assert _moved(cache) is None  # never viewed since its list: anything may have changed
    cache.apply(event("ADDED", node("a", "11")))
    cache.apply(event("ADDED", node("b", "12")))
    assert _moved(cache) == {"a", "b"}
    assert _moved(cache) == set()
    cache.apply(event("DELETED", node("a", "13")))
    cache.apply(event("MODIFIED", node("c", "14", pool="elsewhere")))
    assert _moved(cache) == {"a", "c"}
    cache._broke()  # noqa: SLF001
    clock.now += 120
    assert cache.view_changes() is None  # stale: the loop lists Nodes itself
    cache._broken_at = None  # noqa: SLF001 - the watch works again
    assert _moved(cache) is None  # the next view is compared with a list, not with the last view


def _moved(cache: NodeCache) -> set[str] | None:
    view = cache.view_changes()
    assert view is not None
    return view[2]
