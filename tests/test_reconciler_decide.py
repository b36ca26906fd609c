"""The reconciler's decision, rule by rule: a pure function, tested without I/O."""

from __future__ import annotations

from dataclasses import replace

from generator.reconciler.decide import decide
from generator.reconciler.model import (
    ALL_POOLS,
    Breaker,
    ClearHumanRelease,
    Cordon,
    Event,
    Evidence,
    NodeState,
    NoteHumanRelease,
    Observation,
    Policy,
    Release,
    SetHealthyChecks,
)

NOW = 1_000_000.0
POLICY = Policy(healthy_checks_to_release=3, cooldown_seconds=600, flap_count=3, flap_window_seconds=3600,
                max_unhealthy_percent=50)
XID79 = Evidence("xid-79", "cordon", gpu="3", detail="fell off the bus")
DBE = Evidence("ecc_dbe", "cordon", gpu="1")
XID155 = Evidence("xid-155", "corroborate", gpu="2")
NVLINK = Evidence("nvlink_errors", "count", gpu="2", detail="250 errors in 5m")


def pool(n: int, name: str = "h100") -> dict[str, NodeState]:
    return {f"{name}-{i}": NodeState(f"{name}-{i}", name) for i in range(n)}


def healthy(nodes: dict[str, NodeState]) -> dict[str, Observation]:
    return {n: Observation(n) for n in nodes}


def kinds(decision: object, kind: type) -> list:
    return [a for a in decision.actions if isinstance(a, kind)]  # type: ignore[attr-defined]


def test_fatal_xid_cordons_with_reason_and_event() -> None:
    nodes = pool(10)
    obs = {**healthy(nodes), "h100-3": Observation("h100-3", (XID79,))}
    decision = decide(obs, nodes, POLICY, {}, NOW)
    (cordon,) = kinds(decision, Cordon)
    assert cordon.node == "h100-3" and cordon.reason == "xid-79" and cordon.evidence == (XID79,)
    assert cordon.history == (NOW,) and not cordon.repair
    assert any(e.reason == "GPUHealthCordoned" and e.node == "h100-3" for e in kinds(decision, Event))
    assert decision.breakers == {}


def test_unknown_never_cordons_or_releases_or_counts() -> None:
    nodes = pool(4)
    nodes["h100-0"] = replace(nodes["h100-0"], unschedulable=True, owned=True, reason="xid-79", since=0,
                              healthy_checks=2)
    obs = {name: Observation(name, unknown=True) for name in nodes}
    obs["h100-1"] = Observation("h100-1", (XID79,), unknown=True)  # evidence, but a source is down
    decision = decide(obs, nodes, POLICY, {}, NOW)
    assert decision.actions == ()
    assert any("health unknown" in s for s in decision.skipped)
    assert decide({}, nodes, POLICY, {}, NOW).actions == ()  # no observation at all = unknown


def test_release_after_healthy_checks_and_cooldown_only() -> None:
    held = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79", since=NOW - 1000,
                     healthy_checks=1, cordon_boot_id="boot-1", boot_id="boot-2")  # rebooted since
    nodes = {**pool(4), "h100-0": held}
    first = decide(healthy(nodes), nodes, POLICY, {}, NOW)
    assert kinds(first, SetHealthyChecks) == [SetHealthyChecks("h100-0", 2)] and not kinds(first, Release)
    second = decide(healthy(nodes), {**nodes, "h100-0": replace(held, healthy_checks=2)}, POLICY, {}, NOW)
    assert kinds(second, Release) == [Release("h100-0")]
    # Enough checks but still cooling down: hold.
    young = replace(held, healthy_checks=2, since=NOW - 60)
    third = decide(healthy(nodes), {**nodes, "h100-0": young}, POLICY, {}, NOW)
    assert not kinds(third, Release) and kinds(third, SetHealthyChecks) == [SetHealthyChecks("h100-0", 3)]


def test_a_reset_class_fault_is_released_only_after_a_reset_or_reboot() -> None:
    """Issue 13: XID 154 (reset or reboot required) was released at t+900 s without either."""
    held = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-154", since=NOW - 1000,
                     healthy_checks=5, cordon_boot_id="boot-1", boot_id="boot-1")
    nodes = {**pool(4), "h100-0": held}
    waiting = decide(healthy(nodes), nodes, POLICY, {}, NOW)
    assert not kinds(waiting, Release)
    assert any("until a GPU reset or reboot (bootID unchanged)" in line for line in waiting.skipped)
    rebooted = decide(healthy(nodes), {**nodes, "h100-0": replace(held, boot_id="boot-2")}, POLICY, {}, NOW)
    assert kinds(rebooted, Release) == [Release("h100-0")]
    # A cordon with no bootID on record (or a Node that reports none) is never released by quiet metrics.
    unknown = decide(healthy(nodes), {**nodes, "h100-0": replace(held, cordon_boot_id="")}, POLICY, {}, NOW)
    assert not kinds(unknown, Release)
    # A fault that needs no reset (health check FAIL) is released on metrics alone.
    check = replace(held, reason="health_fail")
    assert kinds(decide(healthy(nodes), {**nodes, "h100-0": check}, POLICY, {}, NOW), Release) == [Release("h100-0")]


def test_a_held_node_missing_gpus_is_not_healthy() -> None:
    """Issue 13: a held node whose exporter reported no GPUs counted as healthy; without
    kube-state-metrics the missing-GPU rule matched nothing. The Node's own capacity is the reference."""
    held = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="health_fail", since=NOW - 1000,
                     healthy_checks=5, gpus=8)
    nodes = {**pool(4), "h100-0": held}
    for reporting in (0, 7):
        obs = {**healthy(nodes), "h100-0": Observation("h100-0", gpus_reporting=reporting)}
        decision = decide(obs, nodes, POLICY, {}, NOW)
        assert not kinds(decision, Release) and kinds(decision, SetHealthyChecks) == [SetHealthyChecks("h100-0", 0)]
    all_eight = {**healthy(nodes), "h100-0": Observation("h100-0", gpus_reporting=8)}
    assert kinds(decide(all_eight, nodes, POLICY, {}, NOW), Release) == [Release("h100-0")]
    # A free node reporting 7 of its 8 GPUs is cordoned for it.
    free = {**pool(4), "h100-1": NodeState("h100-1", "h100", gpus=8)}
    (cordon,) = kinds(decide({**healthy(free), "h100-1": Observation("h100-1", gpus_reporting=7)}, free, POLICY,
                             {}, NOW), Cordon)
    assert cordon.reason == "gpus_missing" and cordon.evidence[0].detail == "7 of 8 GPUs report"


def test_faulty_again_resets_the_healthy_count() -> None:
    held = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79", since=NOW, healthy_checks=2)
    decision = decide({"h100-0": Observation("h100-0", (XID79,))}, {"h100-0": held}, POLICY, {}, NOW)
    assert decision.actions == (SetHealthyChecks("h100-0", 0),)


def test_only_our_own_cordons_are_lifted() -> None:
    foreign = NodeState("h100-0", "h100", unschedulable=True)  # cordoned by a human or another tool
    nodes = {**pool(4), "h100-0": foreign}
    for _ in range(5):
        decision = decide(healthy(nodes), nodes, POLICY, {}, NOW)
        assert not kinds(decision, Release) and not kinds(decision, SetHealthyChecks)
    faulty = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, {}, NOW)
    assert not kinds(faulty, Cordon)  # already cordoned: not ours to take over
    assert any("already cordoned by someone else" in s for s in faulty.skipped)


def test_human_uncordon_is_respected_for_the_same_finding_only() -> None:
    released = NodeState("h100-0", "h100", unschedulable=False, owned=True, reason="xid-79", since=NOW - 100)
    nodes = {**pool(4), "h100-0": released}
    same = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, {}, NOW)
    assert NoteHumanRelease("h100-0", "xid-79") in same.actions and not kinds(same, Cordon)
    remembered = {**nodes, "h100-0": NodeState("h100-0", "h100", human_released="xid-79")}
    again = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, remembered, POLICY, {}, NOW)
    assert not kinds(again, Cordon) and any("a human released it" in s for s in again.skipped)
    new_fault = decide({**healthy(nodes), "h100-0": Observation("h100-0", (DBE,))}, remembered, POLICY, {},
                       NOW)
    assert [c.reason for c in kinds(new_fault, Cordon)] == ["ecc_dbe"]
    recovered = decide(healthy(nodes), remembered, POLICY, {}, NOW)
    assert ClearHumanRelease("h100-0") in recovered.actions


def test_breaker_trips_at_the_threshold_and_holds() -> None:
    nodes = pool(10)
    five = {**healthy(nodes), **{f"h100-{i}": Observation(f"h100-{i}", (XID79,)) for i in range(5)}}
    at_limit = decide(five, nodes, POLICY, {}, NOW)
    assert len(kinds(at_limit, Cordon)) == 5 and at_limit.breakers == {}  # 50% of 10 is allowed
    six = {**healthy(nodes), **{f"h100-{i}": Observation(f"h100-{i}", (XID79,)) for i in range(6)}}
    over = decide(six, nodes, POLICY, {}, NOW)
    assert kinds(over, Cordon) == [] and over.breakers["h100"].tripped and over.breakers["h100"].since == NOW
    assert "6 of 10 nodes" in over.breakers["h100"].reason
    # Held cordons count too: 4 held + 2 new > 5.
    held = {**nodes, **{f"h100-{i}": replace(nodes[f"h100-{i}"], unschedulable=True, owned=True, reason="x",
                                               since=NOW) for i in range(4)}}
    more = {**healthy(nodes), "h100-8": Observation("h100-8", (XID79,)), "h100-9": Observation("h100-9", (DBE,))}
    assert decide(more, held, POLICY, {}, NOW).breakers["h100"].tripped
    # Once tripped: nothing is cordoned or released, even a single fault or a healthy held node.
    tripped = over.breakers
    later = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, tripped, NOW + 9999)
    assert not kinds(later, Cordon) and later.breakers == tripped
    ready = {**nodes, "h100-0": NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="x", since=0,
                                          healthy_checks=5)}
    assert not kinds(decide(healthy(ready), ready, POLICY, tripped, NOW), Release)


def test_breaker_counts_every_unschedulable_node_whoever_cordoned_it() -> None:
    """Issue 13: cordons by humans or the autoscaler were not counted. 5 of 10 down already (4 by
    someone else, 1 ours): one more fault would leave 6 unschedulable, past 50%."""
    nodes = pool(10)
    nodes.update({f"h100-{i}": replace(nodes[f"h100-{i}"], unschedulable=True) for i in range(4)})
    nodes["h100-4"] = replace(nodes["h100-4"], unschedulable=True, owned=True, reason="xid-79", since=NOW)
    decision = decide({**healthy(nodes), "h100-9": Observation("h100-9", (XID79,))}, nodes, POLICY, {}, NOW)
    assert kinds(decision, Cordon) == [] and decision.breakers["h100"].tripped
    assert "(5 already)" in decision.breakers["h100"].reason


def test_breaker_limit_rounds_up_and_allows_one_node() -> None:
    """Issue 13: floor() meant a 1-node pool could never be cordoned and 2 faults in a 3-node pool
    cordoned neither."""
    one = pool(1, "l4")
    single = decide({"l4-0": Observation("l4-0", (XID79,))}, one, POLICY, {}, NOW)
    assert [c.node for c in kinds(single, Cordon)] == ["l4-0"] and single.breakers == {}
    three = pool(3, "a100")
    two = decide({**healthy(three), "a100-0": Observation("a100-0", (XID79,)),
                  "a100-1": Observation("a100-1", (DBE,))}, three, POLICY, {}, NOW)
    assert len(kinds(two, Cordon)) == 2 and two.breakers == {}  # ceil(1.5) = 2
    tight = replace(POLICY, max_unhealthy_percent=10)
    assert len(kinds(decide({**healthy(three), "a100-2": Observation("a100-2", (XID79,))}, three, tight, {}, NOW),
                     Cordon)) == 1  # at least one node, whatever the percentage


def test_breaker_is_per_pool() -> None:
    """Issue 13: one global flag let a 1-node pool's trip freeze a 100-node pool."""
    nodes = {**pool(10, "h100"), **pool(2, "a100")}
    obs = {**healthy(nodes), "a100-0": Observation("a100-0", (XID79,)), "h100-0": Observation("h100-0", (XID79,))}
    decision = decide(obs, nodes, POLICY, {}, NOW)  # 1 of 2 a100 is 50%: allowed
    assert {c.node for c in kinds(decision, Cordon)} == {"a100-0", "h100-0"}
    both = {**obs, "a100-1": Observation("a100-1", (XID79,))}
    tripped = decide(both, nodes, POLICY, {}, NOW)
    assert set(tripped.breakers) == {"a100"} and [c.node for c in kinds(tripped, Cordon)] == ["h100-0"]
    # While a100 is tripped, h100 keeps cordoning and releasing.
    held = {**nodes, "h100-5": NodeState("h100-5", "h100", unschedulable=True, owned=True, reason="x", since=0,
                                         healthy_checks=5)}
    later = decide({**healthy(held), "h100-1": Observation("h100-1", (DBE,))}, held, POLICY, tripped.breakers, NOW)
    assert [c.node for c in kinds(later, Cordon)] == ["h100-1"] and kinds(later, Release) == [Release("h100-5")]
    assert any("pool a100: breaker tripped" in line for line in later.skipped)


def test_a_breaker_saved_before_pools_holds_every_pool() -> None:
    nodes = {**pool(10, "h100"), **pool(2, "a100")}
    obs = {**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}
    legacy = {ALL_POOLS: Breaker(True, "old", NOW)}
    assert kinds(decide(obs, nodes, POLICY, legacy, NOW), Cordon) == []


def test_a_pool_tripping_this_loop_releases_nothing_and_says_nothing_about_releases() -> None:
    nodes = pool(4)
    nodes["h100-0"] = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="x", since=0,
                                healthy_checks=5)
    obs = {**healthy(nodes), **{f"h100-{i}": Observation(f"h100-{i}", (XID79,)) for i in (1, 2, 3)}}
    decision = decide(obs, nodes, POLICY, {}, NOW)
    assert decision.breakers["h100"].tripped
    assert not kinds(decision, Release) and not [e for e in kinds(decision, Event) if e.reason == "GPUHealthReleased"]


def test_flapping_node_is_labelled_for_repair_and_never_released() -> None:
    nodes = {**pool(10), "h100-0": NodeState("h100-0", "h100", history=(NOW - 3000, NOW - 1500, NOW - 99999))}
    decision = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, {}, NOW)
    (cordon,) = kinds(decision, Cordon)
    assert cordon.repair and cordon.history == (NOW - 3000, NOW - 1500, NOW)  # the old one left the window
    held = {**nodes, "h100-0": NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79",
                                         since=0, healthy_checks=10, needs_repair=True)}
    assert not kinds(decide(healthy(held), held, POLICY, {}, NOW), Release)


def test_corroboration_and_warn_only_signals() -> None:
    nodes = pool(10)
    alone = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID155,))}, nodes, POLICY, {}, NOW)
    assert not kinds(alone, Cordon)
    paired = Observation("h100-0", (XID155, Evidence("health_fail", "cordon", gpu="7"), NVLINK))
    assert [c.reason for c in kinds(decide({"h100-0": paired}, nodes, POLICY, {}, NOW), Cordon)] == [
        "health_fail,xid-155"]  # 155 corroborated by NVLink errors on the same GPU 2
    warn = decide({**healthy(nodes), "h100-1": Observation("h100-1", (NVLINK,))}, nodes, POLICY, {}, NOW)
    assert not kinds(warn, Cordon)
    (event,) = kinds(warn, Event)
    assert event.kind == "Warning" and "nvlink_errors on GPU 2" in event.message


def test_decide_is_pure() -> None:
    nodes = pool(10)
    obs = {**healthy(nodes), "h100-3": Observation("h100-3", (XID79,))}
    assert decide(obs, nodes, POLICY, {}, NOW) == decide(obs, nodes, POLICY, {}, NOW)
