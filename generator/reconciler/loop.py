"""The reconcile loop: read nodes, observe, decide, act; only while holding the Lease."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from generator.reconciler.decide import decide
from generator.reconciler.lease import BreakerStore, LeaderLease
from generator.reconciler.model import Breaker, Decision, Observation, Policy
from generator.reconciler.nodes import Executor, PoolSelector

log = logging.getLogger("fleetgen.health")


def merge(*views: dict[str, Observation]) -> dict[str, Observation]:
    """Combine sources: unknown if any source is unknown for the node, else all evidence together."""
    out: dict[str, Observation] = {}
    for view in views:
        for name, obs in view.items():
            prev = out.get(name)
            if prev is None:
                out[name] = obs
            else:
                out[name] = Observation(name, prev.evidence + obs.evidence, prev.unknown or obs.unknown)
    return out


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

    def once(self) -> Decision | None:
        """One loop; None when another replica leads."""
        if self.lease is not None and not self.lease.acquire():
            return None
        nodes = self.executor.read(self.pools)
        observations = merge(*(s.observe(sorted(nodes)) for s in self.sources))
        breaker = self.breaker.load()
        decision = decide(observations, nodes, self.policy, breaker, self.clock())
        for line in decision.skipped:
            log.info(line)
        may_write = self.lease.still_leading if self.lease is not None else (lambda: True)
        self.executor.apply(decision, may_write)
        if decision.breaker != breaker and not self.executor.dry_run and may_write():
            self.breaker.save(decision.breaker)
        self.last = decision
        return decision

    def run(self, period: float | None, stop: threading.Event,
            on_loop: Callable[[Decision | None, float], None] | None = None) -> None:
        """Loop every `period` seconds (default: the policy's) until `stop` is set."""
        every = self.period if period is None else period
        while not stop.is_set():
            started = time.monotonic()
            decision: Decision | None = None
            try:
                decision = self.once()
            except Exception:  # noqa: BLE001 - one failed loop must not end the reconciler
                log.exception("reconcile loop failed; retrying next period")
            if on_loop is not None:
                on_loop(decision, time.monotonic() - started)
            stop.wait(max(0.0, every - (time.monotonic() - started)))

    def reset_breaker(self) -> None:
        """What `fleetgen health reset-breaker` does: a human says the fleet is fine again."""
        self.breaker.save(Breaker())
