"""Leader election on the real API server: one writer, even with a slow loop or skewed clocks.

Each replica authenticates with its own token of the rendered ServiceAccount, so the audit log
tells which replica wrote. The health source is a stub here (Prometheus is exercised in
test_reconciler_integration); what is under test is the Lease and the writes it guards.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from generator.jobs import connect
from generator.reconciler.lease import LEASE, BreakerStore, LeaderLease
from generator.reconciler.loop import Reconciler
from generator.reconciler.model import ANNOTATION_OWNED, Evidence, Observation, Policy
from generator.reconciler.nodes import Executor
from tests.upstream.cluster import Stack
from tests.upstream.processes import wait_for
from tests.upstream.reconciler_env import NAMESPACE, Pool, credential_id, reconciler_identity, reset_leadership, writers

XID79 = Evidence("xid-79", "cordon", gpu="0")


@dataclass
class StubSource:
    """Reports an XID on `faulty` nodes, after `delay` seconds (a Prometheus that answers slowly)."""

    faulty: set[str] = field(default_factory=set)
    delay: float = 0.0
    entered: threading.Event = field(default_factory=threading.Event)

    def observe(self, names: list[str]) -> dict[str, Observation]:
        self.entered.set()
        time.sleep(self.delay)
        return {n: Observation(n, (XID79,) if n in self.faulty else ()) for n in names}


def replica(stack: Stack, pool: Pool, name: str, source: StubSource, duration: float,
            clock: Callable[[], float] = time.time) -> tuple[Reconciler, str]:
    """A reconciler replica with a credential of its own; (reconciler, credential id for the audit log)."""
    who = reconciler_identity(stack)
    api = connect(kubeconfig=str(who.kubeconfig))
    lease = LeaderLease(api, NAMESPACE, name, duration_seconds=duration, clock=clock)
    return (Reconciler(Executor(api), [source], pool.selector, Policy(), BreakerStore(api, NAMESPACE), lease),
            credential_id(who))


def test_a_leader_slowed_past_its_lease_writes_nothing_after_a_takeover(kube_stack: Stack) -> None:
    """Replica a takes the Lease, then waits on a slow source longer than the Lease lasts; b takes
    over and cordons. Before the write guard, a went on to write its stale decision as well."""
    reset_leadership(kube_stack)
    pool = Pool(kube_stack)
    pool.add(3)
    faulty = {pool.name(1)}
    slow, quick = StubSource(faulty, delay=4.0), StubSource(faulty)
    a, a_id = replica(kube_stack, pool, "replica-a", slow, duration=2)
    b, b_id = replica(kube_stack, pool, "replica-b", quick, duration=2)
    decisions: list[object] = []
    slow_loop = threading.Thread(target=lambda: decisions.append(a.once()))
    slow_loop.start()
    assert slow.entered.wait(10), "replica a never reached its source"
    assert b.once() is None  # a's record is fresh: b must wait a full duration of its own clock
    took_over = wait_for(b.once, 10)
    slow_loop.join(15)
    assert took_over is not None, "replica b never took over the expired Lease"
    assert pool.cordoned(ANNOTATION_OWNED) == faulty
    assert decisions and decisions[0] is not None  # a did decide: the guard, not luck, kept it from writing
    assert writers(kube_stack, {a_id, b_id}) == {b_id}


def test_a_replica_with_a_clock_an_hour_ahead_does_not_steal_a_live_lease(kube_stack: Stack) -> None:
    """Expiry by observed change, not by renewTime against the local wall clock."""
    reset_leadership(kube_stack)
    pool = Pool(kube_stack)
    pool.add(2)
    source = StubSource({pool.name(0)})
    a, a_id = replica(kube_stack, pool, "replica-a", source, duration=2)
    b, b_id = replica(kube_stack, pool, "replica-b", source, duration=2, clock=lambda: time.time() + 3600)
    assert a.once() is not None
    for _ in range(12):  # 3 s: longer than the Lease, while a keeps renewing
        time.sleep(0.25)
        assert b.once() is None
        a.once()
    assert writers(kube_stack, {a_id, b_id}) == {a_id}


def test_a_lease_left_by_a_dead_replica_is_taken_after_watching_it_for_a_duration(kube_stack: Stack) -> None:
    """`fleetgen health once` (a fresh process) after the Deployment's replicas are gone; and not
    while the holder is alive."""
    from kubernetes import client

    reset_leadership(kube_stack)
    pool = Pool(kube_stack)
    pool.add(1)
    source = StubSource()
    live, _ = replica(kube_stack, pool, "replica-live", source, duration=2)
    assert live.once() is not None
    renewing = threading.Event()

    def keep_renewing() -> None:
        while not renewing.is_set():
            live.once()
            time.sleep(0.3)

    renewer = threading.Thread(target=keep_renewing)
    renewer.start()
    try:
        blocked, _ = replica(kube_stack, pool, "health-once-1", source, duration=2)
        assert blocked.lease is not None and not blocked.lease.acquire_patiently()
    finally:
        renewing.set()
        renewer.join(10)
    # The holder is gone now (its record stops changing): a fresh process waits one duration, then takes it.
    fresh, _ = replica(kube_stack, pool, "health-once-2", source, duration=2)
    assert fresh.lease is not None
    started = time.monotonic()
    assert fresh.lease.acquire_patiently()
    assert time.monotonic() - started >= 2
    lease = client.CoordinationV1Api(kube_stack.client()).read_namespaced_lease(LEASE, NAMESPACE)
    assert lease.spec.holder_identity == "health-once-2" and lease.spec.lease_transitions == 1


def test_the_lease_is_sized_to_the_measured_loop(kube_stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13: a 15 s Lease and a 30 s loop (a node list alone took 15 s at 10k nodes) let the
    Lease lapse between loops. The leader sizes it to period and slowest loop and writes that into
    the Lease, and the follower waits that long, not its own idea of a duration."""
    import math

    import generator.reconciler.lease as lease_module

    monkeypatch.setattr(lease_module, "MIN_LEASE_SECONDS", 1)
    reset_leadership(kube_stack)
    pool = Pool(kube_stack)
    pool.add(1)
    a, _ = replica(kube_stack, pool, "replica-a", StubSource(delay=1.0), duration=1)
    b, _ = replica(kube_stack, pool, "replica-b", StubSource(), duration=1)
    seconds: list[float] = []
    stop = threading.Event()
    runner = threading.Thread(target=a.run, args=(0.2, stop, lambda d, s, failed: seconds.append(s)))
    runner.start()
    wait_for(lambda: len(seconds) >= 3, 15)
    stop.set()
    runner.join(10)
    stopped = time.monotonic()
    assert a.lease is not None
    assert a.lease.duration_seconds == max(1, math.ceil(0.2 * 1.5 + 2 * max(seconds))) >= 3
    from kubernetes import client

    held = client.CoordinationV1Api(kube_stack.client()).read_namespaced_lease(LEASE, NAMESPACE)
    assert held.spec.holder_identity == "replica-a" and held.spec.lease_duration_seconds >= 3
    while time.monotonic() - stopped < held.spec.lease_duration_seconds - 0.5:
        assert b.once() is None  # a's Lease, as a wrote it, still stands
        time.sleep(0.2)
    assert wait_for(b.once, 10), "replica b never took over once a's Lease ran out"
