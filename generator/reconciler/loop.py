"""The reconcile loop: read nodes, observe, decide, act; only while holding the Lease."""

from __future__ import annotations

import gc
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from generator.reconciler.decide import decide
from generator.reconciler.informer import NodeCache
from generator.reconciler.lease import BreakerStore, LeaderLease
from generator.reconciler.model import (
    ALL_POOLS,
    DRAIN,
    Breaker,
    Breakers,
    Changed,
    Decision,
    NodeState,
    Observation,
    Pending,
    Policy,
)
from generator.reconciler.nodes import Executor, ListFailed, PoolSelector

log = logging.getLogger("fleetgen.health")


def merge(*views: dict[str, Observation]) -> dict[str, Observation]:
    """Combine sources: all evidence together, every source's unknown signals together."""
    out: dict[str, Observation] = {}
    for view in views:
        for name, obs in view.items():
            out[name] = _combine(out.get(name), obs)
    return out


def merge_changes(views: list[tuple[dict[str, Observation], Changed]],
                  last: dict[str, Observation] | None) -> tuple[dict[str, Observation], Changed]:
    """`merge` of the sources' views, each with the nodes it says changed since the last loop (None:
    any), given `last` loop's merge (None: none); and the nodes whose merge may have changed.
    Only those are merged again: the result is `merge`'s, at the cost of what changed."""
    if last is None or any(changed is None for _, changed in views):
        return merge(*(view for view, _ in views)), None
    touched: set[str] = set().union(*(changed for _, changed in views if changed))
    out = dict(last)
    for name in touched:
        merged = None
        for view, _ in views:
            if (obs := view.get(name)) is not None:
                merged = _combine(merged, obs)
        if merged is None:
            out.pop(name, None)
        else:
            out[name] = merged
    return out, touched


def _combine(prev: Observation | None, obs: Observation) -> Observation:
    if prev is None:
        return obs
    if _silent(obs):
        return prev  # most nodes, in most sources: nothing to add
    if _silent(prev):
        return obs
    counts = [n for n in (prev.gpus_reporting, obs.gpus_reporting) if n is not None]
    return Observation(obs.node, prev.evidence + obs.evidence, prev.unknown or obs.unknown,
                       min(counts) if counts else None,
                       tuple(sorted({*prev.unknown_signals, *obs.unknown_signals})))


class _Loop(NamedTuple):
    observations: dict[str, Observation]
    calm: frozenset[str]


def _observed(source: Any, names: list[str]) -> tuple[dict[str, Observation], Changed]:
    """A source's view and what changed in it (a source without `observe_changes`: anything)."""
    if hasattr(source, "observe_changes"):
        return source.observe_changes(names)  # type: ignore[no-any-return]
    return source.observe(names), None


def settle_heap() -> None:
    """Collect once, then move every object alive (modules, the node cache, last loop's
    observations) out of the garbage collector's sight (`gc.freeze`): a full collection otherwise
    walks all of them again and again, 0.2 s at 10,000 nodes, in the middle of some loop. Nothing
    of that state is cyclic garbage later: what the loop drops goes by reference counting."""
    gc.collect()
    gc.freeze()


def _silent(obs: Observation) -> bool:
    """Says nothing: no evidence, no GPU count, nothing unknown (merging it changes nothing)."""
    return obs.quiet and obs.gpus_reporting is None


@dataclass
class Reconciler:
    """One replica of the health reconciler."""

    executor: Executor
    sources: list[Any]
    pools: list[PoolSelector]
    policy: Policy
    breaker: BreakerStore
    lease: LeaderLease | None = None
    clock: Callable[[], float] = time.time
    period: float = 30.0
    """Seconds between loops (`health.period`)."""
    last: Decision | None = field(default=None)
    nodes: dict[str, NodeState] = field(default_factory=dict)
    """The GPU nodes as the last loop read them (what /metrics reports: no second list)."""
    pending: Pending = field(default_factory=dict)
    """Signals still within their `for:` (from the last decision)."""
    cache: NodeCache | None = None
    """Nodes kept by a watch (`run` starts it): a loop reads its copy instead of listing every Node,
    and lists only while the cache is not current."""
    listed: bool = False
    """The last loop listed every Node itself (no current cache)."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """Nodes the last loop's read skipped (a field of the wrong type), by name: why. Their health is
    unknown, so nothing is done to them; every other node is decided as usual."""
    _seen: _Loop | None = field(default=None, repr=False)
    """What the last loop merged and found calm (None: start over from every node)."""

    def once(self) -> Decision | None:
        """One loop; None when another replica leads."""
        if self.lease is not None and not self.lease.acquire():
            self.pending = {}  # a follower saw none of the loops in between: its clocks start over
            self._seen = None
            return None
        view = self.cache.view_changes() if self.cache is not None else None
        self.listed = view is None
        moved: Changed
        if view is None:
            nodes, moved = self.executor.read(self.pools), None  # the loop's one node list
            unreadable = self.executor.unreadable
        else:
            nodes, uids, moved = view
            self.executor.remember(uids)
            unreadable = self.cache.unreadable() if self.cache is not None else {}
        if unreadable != self.unreadable and unreadable:
            log.warning(json.dumps({"unreadableNodes": len(unreadable), "healthUnknown": dict(
                sorted(unreadable.items())[:20])}))
        self.nodes, self.unreadable = nodes, unreadable
        decision, breakers = self.think(nodes, moved)
        for line in decision.skipped:
            log.info(line)
        may_write = self.lease.still_leading if self.lease is not None else (lambda: True)
        self.executor.apply(decision, may_write)
        if dict(decision.breakers) != dict(breakers) and not self.executor.dry_run and may_write():
            self.breaker.save(decision.breakers)
        self.last = decision
        return decision

    def think(self, nodes: dict[str, NodeState], moved: Changed) -> tuple[Decision, Breakers]:
        """Observe and decide (no write), given the nodes whose state may have changed since the last
        loop's (`moved`; None: any); the decision and the breakers it started from.

        Costs what changed: each source says which nodes' Observations may differ from its last
        (see `observe_changes`), only those are merged again, and the nodes of the last decision's
        `calm` that changed in neither way are not looked at by the decision. A loop that fails
        leaves the next to start over from every node."""
        before, self._seen = self._seen, None
        names = sorted(nodes)
        views = [_observed(source, names) for source in self.sources]
        observations, changed = merge_changes(views, before.observations if before is not None else None)
        calm: frozenset[str] = frozenset()
        if before is not None and changed is not None and moved is not None:
            calm = before.calm.difference(changed, moved)
        breakers = self.breaker.load()
        decision = decide(observations, nodes, self.policy, breakers, self.clock(), self.pending, calm)
        self.pending = decision.pending
        self._seen = _Loop(observations, decision.calm)
        return decision, breakers

    def run(self, period: float | None, stop: threading.Event,
            on_loop: Callable[[Decision | None, float, bool], None] | None = None) -> None:
        """Loop every `period` seconds (default: the policy's) until `stop` is set. `on_loop` hears
        of every loop: its decision (None when following), its seconds, and whether it failed."""
        every = self.period if period is None else period
        if self.cache is not None:
            self.cache.start(stop)
        settled = -1
        while not stop.is_set():
            started = time.monotonic()
            decision: Decision | None = None
            failed = False
            try:
                decision = self.once()
            except ListFailed as exc:  # the API server's answer, explained: no traceback
                failed = True
                log.warning(json.dumps({"loop": "failed", "why": str(exc), "retry": "next period"}))
            except Exception:  # noqa: BLE001 - one failed loop must not end the reconciler
                failed = True
                log.exception("reconcile loop failed; retrying next period")
            seconds = time.monotonic() - started
            lists = self.cache.lists if self.cache is not None else 0
            if lists != settled:  # after the first loop, and after the cache listed again
                settle_heap()
                settled = lists
            if self.lease is not None:
                self.lease.fit(every, seconds)
            if on_loop is not None:
                try:
                    on_loop(decision, seconds, failed)
                except Exception:  # noqa: BLE001 - reporting must not end the reconciler either
                    log.exception("reporting the loop failed")
            stop.wait(max(0.0, every - (time.monotonic() - started)))

    def reset_breaker(self, pool: str | None = None, drain: bool = False) -> dict[str, Breaker]:
        """What `fleetgen health reset-breaker` does: a human says a pool (or every pool) is fine
        again. `drain` resets the drain breakers instead of the cordon breakers. Returns the
        breakers that were tripped and are now reset."""
        before = self.breaker.load()

        def chosen(key: str) -> bool:
            if key.startswith(DRAIN) != drain:
                return False
            name = key.removeprefix(DRAIN)
            return pool is None or name in (pool, ALL_POOLS)

        reset = {key: b for key, b in before.items() if chosen(key)}
        if reset:
            self.breaker.save({key: b for key, b in before.items() if key not in reset})
        return reset
